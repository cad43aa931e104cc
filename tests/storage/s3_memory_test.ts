// Peak memory of a large save to S3, measured in a child process (VmHWM): the save holds its part
// buffers and not much more, whatever the object's size. Through Deno's fetch, which copies every
// request body into memory V8 frees lazily, the same save grew by 179 MiB (128 MiB object) and 221
// MiB (1 GiB); through node:http it grows by 56-58 MiB for either.
import assert from "node:assert/strict";
import { s3Test } from "../_s3.ts";

const MiB = 2 ** 20;
const PART = 8 * MiB;
const CONCURRENCY = 4;
/** The save's part buffers (in flight and filling), plus a runtime's slack for sockets, hashing and code. */
const BOUND = (CONCURRENCY + 1) * PART + 40 * MiB;

s3Test(`a 192 MiB save to S3 grows the resident set by at most its parts in flight + 40 MiB`, async (b) => {
  const config = JSON.stringify({
    bucket: b.name,
    endpoint: b.endpoint.endpoint,
    region: b.endpoint.region,
    credentials: b.endpoint.credentials,
    partSize: PART,
    concurrency: CONCURRENCY,
  });
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", new URL("./_s3_memory_child.ts", import.meta.url).pathname, config, "192"],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert.ok(out.success, "the child saved");
  const { before, peak } = JSON.parse(new TextDecoder().decode(out.stdout));
  const grew = peak - before;
  assert.ok(
    grew <= BOUND,
    `peak RSS grew by ${(grew / MiB).toFixed(0)} MiB during the save, over ${(BOUND / MiB).toFixed(0)} MiB`,
  );
  assert.ok(((await b.store().head("big.ckpt"))?.size ?? 0) > 192 * MiB, "the checkpoint is there, whole");
});
