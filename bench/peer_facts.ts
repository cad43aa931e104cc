/**
 * What ckpt's peers do about durability and verification, checked rather than assumed: each save
 * (Orbax, PyTorch DCP, safetensors, tf.train.Checkpoint, torch.save, and ckpt's own) runs under
 * `strace -f -y`, and the log says which files and directories it flushed and what it renamed
 * into place; then one bit is flipped in the middle of the checkpoint's largest file and the
 * peer's load is asked for the tensors (24 MiB by default: a 16 MiB and an 8 MiB tensor, so the
 * middle falls inside the first tensor's values rather than on a boundary between tensors): an error, wrong values handed out, or (a bit the load
 * does not read) the right ones. Prints one markdown table. The peers come from the environment
 * `scripts/peers_venv.sh` builds (run first, and reused); strace from Debian's `strace`.
 *
 *   deno task bench:peer-facts [--mib 24] [--dir DIR]
 *
 * @module
 */
import { parseArgs } from "node:util";
import { basename, dirname, join, relative } from "node:path";
import { flushedPaths, syncEvents } from "./_strace.ts";
import { peersPython } from "./_peers_env.ts";

const { values } = parseArgs({
  options: { mib: { type: "string", default: "24" }, dir: { type: "string" } },
});
const mib = Number(values.mib);
if (!Number.isSafeInteger(mib) || mib < 1) {
  throw new RangeError(`Invalid --mib ${values.mib}: expected a whole number ≥ 1`);
}

const env = await peersPython();
if ("error" in env) {
  console.error(env.error);
  Deno.exit(2);
}
const strace = await new Deno.Command("strace", { args: ["-V"], stdout: "null", stderr: "null" }).output()
  .then((o) => o.success, () => false);
if (!strace) {
  console.error("peer_facts: strace is not installed (apt-get install strace)");
  Deno.exit(2);
}

if (values.dir) await Deno.mkdir(values.dir, { recursive: true });
const dir = await Deno.realPath(values.dir ?? await Deno.makeTempDir({ prefix: "ckpt-peer-facts-" }));
const peersPy = new URL("./_peers.py", import.meta.url).pathname;
const saveOne = new URL("./_save_one.ts", import.meta.url).pathname;
const deno = Deno.execPath();
const raw = join(dir, "raw.bin");

async function run(cmd: string, args: string[]): Promise<{ ok: boolean; stdout: string; stderr: string }> {
  const o = await new Deno.Command(cmd, { args, env: { NO_COLOR: "1" }, stdout: "piped", stderr: "piped" }).output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { ok: o.success, stdout: text(o.stdout), stderr: text(o.stderr) };
}

/** A save as a command line, and the load that reads its format back (where it has its own row). */
interface Peer {
  name: string;
  out: string;
  save: [string, string[]];
  load?: [string, string[]];
}
const py = (op: string, peer: string, out: string, check = false): [string, string[]] => [
  env.python,
  [peersPy, op, peer, raw, out, ...(check ? ["--check"] : [])],
];
const ckptOp = (op: string, out: string): [string, string[]] => [deno, [
  "run",
  "-A",
  saveOne,
  "--op",
  op,
  "--mib",
  String(mib),
  "--out",
  out,
]];
const peers: Peer[] = [
  ["Orbax `StandardCheckpointer`", "orbax", "orbax"],
  ["Orbax `CheckpointManager`", "orbax-manager", undefined],
  ["`dcp.save`", "dcp", "dcp"],
  ["`dcp.async_save`", "dcp-async", undefined],
  ["safetensors `save_file` / `load_file`", "safetensors", "safetensors-touched"],
  ["safetensors `save_file` + fsync, rename, directory fsync (by hand)", "safetensors-durable", undefined],
  ["`tf.train.Checkpoint` write / read", "tf", "tf"],
  ["`torch.save` / `torch.load`", "torch", "torch"],
].map(([name, save, load]) => {
  const out = join(dir, save!);
  return { name: name!, out, save: py("save", save!, out), ...(load ? { load: py("load", load, out, true) } : {}) };
});
const ckptOut = join(dir, "ckpt.ckpt");
peers.push({ name: "ckpt `saveCheckpoint` / `loadCheckpoint`", out: ckptOut, save: ckptOp("save", ckptOut) });

/** The largest file at or under `path`. */
async function largest(path: string): Promise<{ path: string; size: number }> {
  const st = await Deno.stat(path);
  if (st.isFile) return { path, size: st.size };
  let best = { path: "", size: -1 };
  for await (const e of Deno.readDir(path)) {
    const b = await largest(join(path, e.name));
    if (b.size > best.size) best = b;
  }
  return best;
}

async function kind(path: string): Promise<"file" | "dir" | "gone"> {
  const st = await Deno.stat(path).catch(() => undefined);
  return st === undefined ? "gone" : st.isDirectory ? "dir" : "file";
}

/** Flips one bit of the byte in the middle of the largest file; returns that file and offset. */
async function flipMiddleBit(out: string): Promise<string> {
  const { path, size } = await largest(out);
  const f = await Deno.open(path, { read: true, write: true });
  try {
    const at = Math.floor(size / 2);
    const b = new Uint8Array(1);
    await f.seek(at, Deno.SeekMode.Start);
    await f.read(b);
    b[0]! ^= 0x10;
    await f.seek(at, Deno.SeekMode.Start);
    await f.write(b);
  } finally {
    f.close();
  }
  return `${relative(dirname(out), path)} (${size} B), byte ${Math.floor(size / 2)}`;
}

const made = await run(...ckptOp("raw", raw));
if (!made.ok) throw new Error(`could not write the raw tensors: ${made.stderr}`);
console.log(
  `peers' durability and verification — ${mib} MiB of float32 in ${Math.ceil(mib / 16)} tensor(s), ${
    new Date().toISOString().slice(0, 16)
  }Z; ${env.versions}\n`,
);
console.log(
  "| save / load | files fsynced | directories fsynced | renamed into place | the name made durable (parent fsynced after the rename) | one bit flipped in the middle of the largest file: the load |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
for (const p of peers) {
  const log = join(dir, `${p.name.replace(/\W+/g, "_")}.strace`);
  const [cmd, args] = p.save;
  const saved = await run("strace", [
    "-f",
    "-qq",
    "-y",
    "-e",
    "trace=fsync,fdatasync,sync_file_range,syncfs,rename,renameat,renameat2",
    "-o",
    log,
    cmd,
    ...args,
  ]);
  if (!saved.ok) {
    console.log(`| ${p.name} | save failed: ${saved.stderr.trim().split("\n").at(-1)} | | | | |`);
    continue;
  }
  const events = syncEvents(await Deno.readTextFile(log));
  const parent = dirname(p.out);
  // The checkpoint's own paths: itself, what is under it, and temporary names beside it that carry its name.
  const inside = (path: string) =>
    dirname(path) === parent ? basename(path).includes(basename(p.out)) : path.startsWith(p.out + "/") ||
      (path.startsWith(parent + "/") && relative(parent, path).split("/")[0]!.includes(basename(p.out)));
  const files = new Set<string>(), dirs = new Set<string>();
  for (const s of flushedPaths(events)) {
    // (The small save each peer runs first, at OUT.warm, is not this checkpoint's.)
    if ((!inside(s.finalPath) && s.finalPath !== parent) || s.finalPath.includes(".warm")) continue;
    const k = await kind(s.finalPath);
    const name = s.finalPath === parent ? "its parent" : relative(parent, s.finalPath) || ".";
    (k === "dir" ? dirs : files).add(k === "gone" ? `${name} (removed later)` : name);
  }
  // The last rename that gave the checkpoint (or a step directory in it) its name, and whether
  // the directory holding that name was flushed after it.
  const renames = events.flatMap((e, i) =>
    e.kind === "rename" && (e.to === p.out || dirname(e.to) === p.out) ? [i] : []
  );
  const last = renames.at(-1);
  const lastTo = last === undefined ? "" : (events[last] as { to: string }).to;
  const nameDurable = last !== undefined &&
    events.slice(last + 1).some((e) => e.kind === "sync" && e.path === dirname(lastTo));
  const list = (s: Set<string>) =>
    s.size === 0 ? "none" : s.size > 4 ? `${s.size}: ${[...s].slice(0, 3).join(", ")}, …` : [...s].join(", ");
  let flipped = "(same format as the row above)";
  if (p.load || p.out === ckptOut) {
    const where = await flipMiddleBit(p.out);
    const [lcmd, largs] = p.load ?? ckptOp("load", p.out);
    const r = await run(lcmd, largs);
    const json = r.stdout.trim().split("\n").at(-1) ?? "";
    let said: string;
    if (p.load && !json.startsWith("{")) {
      said = `error: the load's process failed: ${r.stderr.trim().split("\n").at(-1)?.slice(0, 200)}`;
    } else if (p.load) {
      const v = JSON.parse(json) as { error?: string; match?: boolean };
      said = v.error !== undefined
        ? `error: ${v.error.replace(/\{\{[^}]*\}\}\s*/g, "").slice(0, 200)}`
        : v.match
        ? "right values (the bit was not read)"
        : "**wrong values, no error**";
    } else {
      const line = r.stderr.split("\n").find((l) => /Error/.test(l)) ?? r.stderr.trim().split("\n")[0] ?? "";
      said = r.ok ? "**no error**" : `error: ${line.replace(/^error: (Uncaught \(in promise\) )?/, "").slice(0, 200)}`;
    }
    flipped = `${said} (bit in ${where.replace(/\|/g, "/")})`;
  }
  console.log(
    `| ${p.name} | ${list(files)} | ${list(dirs)} | ${last === undefined ? "no" : "yes"} | ${
      last === undefined ? "n/a" : nameDurable ? "yes" : "**no**"
    } | ${flipped.replace(/\|/g, "/")} |`,
  );
}
if (!values.dir) await Deno.remove(dir, { recursive: true });
