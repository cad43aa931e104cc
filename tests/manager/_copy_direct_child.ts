// copyFrom with FFI granted, in a process of its own: the committed file is read around the page
// cache (O_DIRECT) into part buffers on the block grid, to a local directory (4 MiB chunks) and to
// the S3 endpoint (parts on the grid, and parts off it, read through the file handle). Prints
// whether direct reads were open to the copy and what arrived, for a sound file and a damaged one.
import { ChecksumMismatchError } from "../../src/format/errors.ts";
import { CheckpointManager } from "../../src/manager/mod.ts";
import { openDirectRead } from "../../src/storage/_direct_io.ts";
import { withBucket } from "../_s3.ts";
import { makeCheckpoint } from "./_helpers.ts";

const dir = await Deno.makeTempDir();
const same = (a: Uint8Array, b: Uint8Array) => a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
try {
  const local = await CheckpointManager.open(`${dir}/local`);
  const saved = await local.save(makeCheckpoint(7, { trained: 7_000_000 })); // 28 MB: 7 chunks of 4 MiB
  const original = await Deno.readFile(saved.path);
  const probe = openDirectRead(saved.path);
  probe?.close();

  const remote = await CheckpointManager.open(`${dir}/remote`);
  const copied = await remote.copyFrom(local, 7);
  const arrived: Record<string, boolean> = { local: same(await Deno.readFile(copied.path), original) };
  const refused: Record<string, boolean> = {};
  await withBucket(async (b) => {
    // 5 MiB parts lie on the 4 KiB grid; one byte more does not (read through the handle).
    for (const partSize of [5 * 2 ** 20, 5 * 2 ** 20 + 1]) {
      const store = b.store({ prefix: `p${partSize}`, partSize });
      const m = await CheckpointManager.open(store);
      const e = await m.copyFrom(local, 7);
      const sent = new Uint8Array(
        await new Response((await store.get(e.path.slice(store.url.length))).body).arrayBuffer(),
      );
      arrived[`s3 ${partSize}`] = same(sent, original);
      await m.close();
    }
    const damaged = original.slice();
    damaged[Math.floor(damaged.length * 0.95)]! ^= 0x01; // the trained tensor's data, in the last parts
    await Deno.writeFile(saved.path, damaged);
    const late = await CheckpointManager.open(b.store({ prefix: "late", partSize: 5 * 2 ** 20 }));
    refused.s3 = await late.copyFrom(local, 7).then(() => false, (e) => e instanceof ChecksumMismatchError);
    refused.s3Empty = (await late.list()).length === 0 && (await b.store().uploads()).length === 0;
    await late.close();
    const lateLocal = await CheckpointManager.open(`${dir}/late`);
    refused.local = await lateLocal.copyFrom(local, 7).then(() => false, (e) => e instanceof ChecksumMismatchError);
    refused.localEmpty = (await lateLocal.list()).length === 0;
    await lateLocal.close();
  });
  await remote.close();
  await local.close();
  console.log(
    JSON.stringify({ direct: probe !== undefined, offGrid: original.byteLength % 4096 !== 0, arrived, refused }),
  );
} finally {
  await Deno.remove(dir, { recursive: true });
}
