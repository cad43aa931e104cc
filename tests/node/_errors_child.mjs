// The Node twin of tests/manager/_denied_child.ts and _full_child.ts: saves step 1, then makes the
// next save fail (`denied`: the directory made read-only, run as an unprivileged user; `full`: a
// save larger than the 1 MiB tmpfs it runs on), and prints what happened as JSON.
//
//   node _errors_child.mjs <dir> denied|full <full|incremental>
import process from "node:process";
import { chmod, readdir } from "node:fs/promises";
import { join } from "node:path";
import { CheckpointManager } from "@ckpt/ckpt";

const [dir, what, mode] = process.argv.slice(2);

async function files(d, prefix = "") {
  const out = [];
  for (const e of await readdir(d, { withFileTypes: true })) {
    if (e.isDirectory()) out.push(...await files(join(d, e.name), `${prefix}${e.name}/`));
    else out.push(prefix + e.name);
  }
  return out.sort();
}

const tensor = (name, n, v) => ({ name, dtype: "float32", shape: [n], data: new Float32Array(n).fill(v) });
const manager = await CheckpointManager.open(dir, { incremental: mode === "incremental", onWarning: () => {} });
await manager.save({ metadata: { step: 1 }, tensors: [tensor("a", 1024, 1)] });
const before = await files(dir);
if (what === "denied") await chmod(dir, 0o555);
let error;
try {
  // Denied: any save. Full: 300 KB that fits, then 2 MB that does not.
  const tensors = what === "full" ? [tensor("b", 75_000, 2), tensor("c", 500_000, 3)] : [tensor("a", 1024, 2)];
  await manager.save({ metadata: { step: 2 }, tensors });
} catch (e) {
  error = { name: e.name, message: e.message, code: e.code };
}
const after = await files(dir);
const latest = await manager.latest();
if (what === "denied") await chmod(dir, 0o755);
await manager.close();
console.log(JSON.stringify({ uid: process.getuid(), error, before, after, latest: latest?.metadata.step }));
