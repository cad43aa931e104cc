// Child of fd_leak_test.ts: runs one reader on hostile files many times and prints how many file
// descriptors this process holds before and after (Linux /proc/self/fd; needs -A in Deno).
import { gzipSync } from "node:zlib";
import { loadCheckpoint } from "../../mod.ts";
import { readTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";

const fds = () => [...Deno.readDirSync("/proc/self/fd")].length;
const dir = await Deno.makeTempDir({ prefix: "ckpt-fd-" });
const op = Deno.args[0];
const file = `${dir}/in`;
const F32_1 = [0, 0, 0x80, 0x3f];
if (op === "unrecognised") await Deno.writeFile(file, new Uint8Array(100));
if (op === "gzip-unrecognised") await Deno.writeFile(file, gzipSync(new Uint8Array(100)));
if (op === "tfjs-trailing" || op === "tfjs-bool") {
  // A shard one byte too long, or holding a bool byte of 2: both refused after the shard is open.
  const weights = op === "tfjs-bool"
    ? [{ name: "b", shape: [4], dtype: "bool" }]
    : [{ name: "w", shape: [1], dtype: "float32" }];
  await Deno.writeFile(`${dir}/w.bin`, new Uint8Array(op === "tfjs-bool" ? [0, 1, 2, 1] : [...F32_1, 9]));
  await Deno.writeTextFile(`${dir}/model.json`, JSON.stringify({ weightsManifest: [{ paths: ["w.bin"], weights }] }));
}
const before = fds();
const errors = new Set<string>();
for (let i = 0; i < 50; i++) {
  try {
    if (op!.startsWith("tfjs")) await readTfjsArtifacts(`${dir}/model.json`);
    else await loadCheckpoint(file);
  } catch (e) {
    errors.add(`${(e as Error).name}: ${(e as Error).message}`);
  }
}
// A file whose read was in flight when the reader gave up is closed when that read returns, which
// on a loaded machine can be a moment after the rejection: wait up to 3 s for the count to come
// back. A leak (one descriptor per read) never does.
let after = fds();
for (const t0 = Date.now(); after > before && Date.now() - t0 < 3000; after = fds()) {
  await new Promise((r) => setTimeout(r, 20));
}
await Deno.remove(dir, { recursive: true });
console.log(JSON.stringify({ before, after, errors: [...errors] }));
