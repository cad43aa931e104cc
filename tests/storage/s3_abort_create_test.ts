// An S3 write aborted while its CreateMultipartUpload is in flight still aborts the upload that
// request made. Once, the abort cancelled that request after the store had acted on it: the upload
// id never arrived, the writer took the upload for never created, and it stayed open (RGW listed
// it; tests/manager/mirror_test.ts saw it now and then).
import assert from "node:assert/strict";
import { S3Store } from "../../src/storage/s3.ts";

Deno.test("S3Store writer: an abort during CreateMultipartUpload aborts the upload it created", async () => {
  const seen: string[] = [];
  let releaseCreate!: () => void;
  const createArrived = Promise.withResolvers<void>();
  const f: typeof fetch = async (input, init) => {
    const req = input instanceof Request ? input : new Request(input, init);
    const url = new URL(req.url);
    if (req.method === "POST" && url.searchParams.has("uploads")) {
      seen.push("create");
      createArrived.resolve();
      // The store acts on the request at once; its answer comes later (or is cut by the client).
      await new Promise<void>((r) => releaseCreate = r);
      req.signal.throwIfAborted();
      return new Response("<InitiateMultipartUploadResult><UploadId>u-1</UploadId></InitiateMultipartUploadResult>");
    }
    if (req.method === "DELETE" && url.searchParams.get("uploadId") === "u-1") {
      seen.push("abort u-1");
      return new Response(null, { status: 204 });
    }
    if (req.method === "PUT" && url.searchParams.has("partNumber")) {
      seen.push(`part ${url.searchParams.get("partNumber")}`);
      req.signal.throwIfAborted();
      return new Response(null, { headers: { etag: '"e"' } });
    }
    throw new Error(`unexpected ${req.method} ${url.search}`);
  };
  const store = new S3Store({
    bucket: "bucket",
    endpoint: "http://127.0.0.1:9",
    region: "us-east-1",
    credentials: { accessKeyId: "a", secretAccessKey: "s" },
    partSize: 5 * 2 ** 20,
    fetch: f,
  });
  const w = await store.writer("k");
  const writing = w.write(new Uint8Array(6 * 2 ** 20)).catch(() => {}); // a full part: the upload starts
  await createArrived.promise;
  const aborting = w.abort(new Error("the verifier found damage"));
  releaseCreate();
  await aborting;
  await writing;
  assert.ok(seen.includes("abort u-1"), `requests: ${seen.join(", ")}`);
});
