// S3Store's resumable GET body after its consumer cancelled it: no request is made for it any more.
// Once, a body cancelled while a read was pending took the end of that read for a broken
// connection, fetched the rest again, failed to hand the bytes to the closed stream, took that for
// a broken connection too, and so on: hundreds of ranged GETs, and a load that never settled.
import assert from "node:assert/strict";
import { S3Store } from "../../src/storage/s3.ts";

const SIZE = 1 << 20;

/** A fake S3 endpoint: each GET answers 206 with the asked range, sent slowly in 4 KiB chunks. */
function slowEndpoint(): { fetch: typeof fetch; gets: () => number } {
  let gets = 0;
  const f: typeof fetch = (input, init) => {
    const req = input instanceof Request ? input : new Request(input, init);
    gets++;
    const m = (req.headers.get("range") ?? "").match(/^bytes=(\d+)-(\d+)$/);
    const from = m ? Number(m[1]) : 0;
    const to = m ? Number(m[2]) : SIZE - 1;
    let at = from;
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        await new Promise((r) => setTimeout(r, 5));
        const n = Math.min(4096, to + 1 - at);
        if (n <= 0) return c.close();
        c.enqueue(new Uint8Array(n).fill(at & 0xff));
        at += n;
      },
    });
    return Promise.resolve(
      new Response(body, {
        status: 206,
        headers: {
          "content-range": `bytes ${from}-${to}/${SIZE}`,
          "content-length": String(to + 1 - from),
          etag: '"v1"',
        },
      }),
    );
  };
  return { fetch: f, gets: () => gets };
}

Deno.test("S3Store: a GET body cancelled by its reader makes no further request", async () => {
  const endpoint = slowEndpoint();
  const store = new S3Store({
    bucket: "bucket",
    endpoint: "http://127.0.0.1:9",
    region: "us-east-1",
    credentials: { accessKeyId: "a", secretAccessKey: "s" },
    fetch: endpoint.fetch,
  });
  const { body } = await store.get("k", { range: { offset: 0, length: SIZE } });
  const reader = body.getReader();
  const first = await reader.read();
  assert.equal(first.done, false);
  // Let the stream fill its queue, so a read of the underlying body is pending when we cancel.
  await new Promise((r) => setTimeout(r, 50));
  await reader.cancel(new Error("the consumer went away"));
  const after = endpoint.gets();
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(endpoint.gets(), after, `requests after the cancel: ${endpoint.gets() - after}`);
  assert.equal(after, 1);
});
