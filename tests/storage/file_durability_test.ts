// A directory the file store or the manager creates is durable only once its parent is flushed:
// its entry lives there. A real subprocess runs under strace (`-y` names each file descriptor's
// path), and the test reads the system calls: every mkdir is followed by an fsync of the new
// directory's parent; and a durable write flushes behind itself (fdatasync between its writes).
// Needs strace (Debian's `strace`, which .ci/run installs); in CI (CI set) a
// missing strace fails the test, elsewhere it skips saying so.
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { IN_CI as inCI } from "../_ci.ts";

const strace = await new Deno.Command("strace", { args: ["-V"], stdout: "null", stderr: "null" }).output()
  .then((o) => o.success, () => false);
if (!strace && !inCI) {
  console.log("skipping the directory durability tests: strace is not installed (apt-get install strace)");
}

const CHILD = `
import { FileStore } from ${JSON.stringify(new URL("../../src/storage/file.ts", import.meta.url).href)};
import { CheckpointManager } from ${JSON.stringify(new URL("../../mod.ts", import.meta.url).href)};
const [root, how] = Deno.args;
if (how === "store") {
  await new FileStore(root).put("blobs/ab/abcdef", new Uint8Array([1, 2, 3]));
  const w = await new FileStore(root).writer("runs/x/step-1.ckpt");
  await w.write(new Uint8Array([4]));
  await w.close();
} else {
  await using m = await CheckpointManager.open(root + "/deep/er/run", { incremental: true });
  await m.save({ metadata: { step: 1 }, tensors: [{ name: "w", dtype: "uint8", shape: [1], data: new Uint8Array([7]) }] });
}
`;

/** The directories created, in order, and the directories flushed after each, from strace's log. */
async function trace(
  how: "store" | "manager",
): Promise<{ root: string; created: string[]; flushedAfter: Map<string, Set<string>> }> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "ckpt-durable-" }));
  const child = join(root, "child.ts");
  await Deno.writeTextFile(child, CHILD);
  const log = join(root, "strace.log");
  await Deno.mkdir(join(root, "data"));
  try {
    const out = await new Deno.Command("strace", {
      args: [
        "-f",
        "-y",
        "-e",
        "trace=mkdir,mkdirat,fsync,fdatasync",
        "-o",
        log,
        Deno.execPath(),
        "run",
        "-A",
        child,
        join(root, "data"),
        how,
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const created: string[] = [];
    const flushedAfter = new Map<string, Set<string>>();
    for (const { line } of straceLines(await Deno.readTextFile(log))) {
      const mk = line.match(/mkdir(?:at)?\((?:[^,]*, )?"([^"]+)".*\) = 0/);
      if (mk && mk[1]!.startsWith(join(root, "data"))) {
        created.push(mk[1]!);
        flushedAfter.set(mk[1]!, new Set());
        continue;
      }
      const fs = line.match(/\bf(?:data)?sync\(\d+<([^>]+)>\) = 0/);
      if (fs) { for (const dir of created) flushedAfter.get(dir)!.add(fs[1]!); }
    }
    return { root: join(root, "data"), created, flushedAfter };
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

function assertParentsFlushed(t: Awaited<ReturnType<typeof trace>>, expected: string[]): void {
  for (const dir of expected) assert.ok(t.created.includes(join(t.root, dir)), `${dir} was created: ${t.created}`);
  for (const dir of t.created) {
    assert.ok(
      t.flushedAfter.get(dir)!.has(dirname(dir)),
      `the parent of the new directory ${dir} is flushed after its mkdir (flushed: ${[...t.flushedAfter.get(dir)!]})`,
    );
  }
}

Deno.test({
  name: "FileStore flushes the parent of every directory it creates (blob shards, nested keys)",
  ignore: !strace && !inCI,
  async fn() {
    assertParentsFlushed(await trace("store"), ["blobs", "blobs/ab", "runs", "runs/x"]);
  },
});

Deno.test({
  name: "CheckpointManager flushes the parents of the directories it creates for a new run",
  ignore: !strace && !inCI,
  async fn() {
    assertParentsFlushed(await trace("manager"), ["deep", "deep/er", "deep/er/run"]);
  },
});

const WRITER = `
import { FileStore } from ${JSON.stringify(new URL("../../src/storage/file.ts", import.meta.url).href)};
const [root, how] = Deno.args;
const store = new FileStore(root, { directWrites: how === "direct" });
const w = await store.writer("big.bin", { sync: how !== "nosync" });
const chunk = new Uint8Array(4 << 20).fill(7);
for (let i = 0; i < 10; i++) await w.write(chunk);
await w.write(new Uint8Array(1000).fill(8));
await w.close();
`;

/**
 * The lines of an `strace -f` log, each with the call it completes joined: a call another thread
 * interrupts is logged in two lines, "PID call(args <unfinished ...>" and "PID <... call resumed>)
 * = result", and strace pads the PID column (two spaces after a 4-digit PID: a resumed line not
 * matched for that made the flush-behind test fail about one run in five on a fresh machine).
 * `logged` is the line as logged, `line` the whole call where it completes.
 */
function* straceLines(text: string): Generator<{ logged: string; line: string }> {
  const unfinished = new Map<string, string>();
  for (const logged of text.split("\n")) {
    let line = logged;
    const pid = line.split(" ", 1)[0]!;
    const cut = line.match(/^(\d+\s.*) <unfinished \.\.\.>$/);
    if (cut) unfinished.set(pid, cut[1]!);
    const resumed = line.match(/^\d+\s+<\.\.\. \w+ resumed>(.*)$/);
    if (resumed && unfinished.has(pid)) {
      line = unfinished.get(pid)! + resumed[1]!;
      unfinished.delete(pid);
    }
    yield { logged, line };
  }
}

/**
 * The writes and flushes of the temporary file a 40 MiB + 1000 byte FileStore write goes through,
 * in order, with their handles' fds (`direct FD` for a descriptor opened with O_DIRECT).
 */
async function traceWrite(how: "direct" | "buffered" | "nosync", flags = ["-A"]): Promise<string[]> {
  const root = await Deno.realPath(await Deno.makeTempDir({ prefix: "ckpt-flush-" }));
  try {
    await Deno.writeTextFile(join(root, "child.ts"), WRITER);
    await Deno.mkdir(join(root, "data"));
    const log = join(root, "strace.log");
    const out = await new Deno.Command("strace", {
      args: [
        "-f",
        "-y",
        "-e",
        "trace=openat,fcntl,write,pwrite64,fdatasync,fsync",
        "-o",
        log,
        Deno.execPath(),
        "run",
        ...flags,
      ]
        .concat([join(root, "child.ts"), join(root, "data"), how]),
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    // Deno runs each call on a duplicate of the handle's fd (fcntl F_DUPFD_CLOEXEC): named by the fd it duplicates.
    const handle = new Map<string, string>();
    const calls: string[] = [];
    // An fcntl's or openat's result is read from its line joined (see straceLines); writes and
    // flushes are counted where they start.
    for (const { logged, line } of straceLines(await Deno.readTextFile(log))) {
      const dup = line.match(/\bfcntl\((\d+)<[^>]*>, F_DUPFD(?:_CLOEXEC)?, \d+\)\s*= (\d+)/);
      if (dup) handle.set(dup[2]!, handle.get(dup[1]!) ?? dup[1]!);
      const opened = line.match(/\bopenat\(.*\)\s*= (\d+)</);
      if (opened) handle.set(opened[1]!, /\bO_DIRECT\b/.test(line) ? `direct ${opened[1]}` : opened[1]!);
      const m = logged.match(/\b(write|pwrite64|fdatasync|fsync)\((\d+)<([^>]+)>/); // where each call starts
      if (m && /\.big\.bin\.tmp-/.test(m[3]!)) {
        calls.push(`${m[1] === "pwrite64" ? "write" : m[1]} ${handle.get(m[2]!) ?? m[2]}`);
      }
    }
    const written = await Deno.readFile(join(root, "data", "big.bin"));
    assert.equal(written.byteLength, (40 << 20) + 1000);
    assert.ok(written.subarray(0, 40 << 20).every((b) => b === 7) && written.subarray(40 << 20).every((b) => b === 8));
    return calls;
  } finally {
    await Deno.remove(root, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  name:
    "FileStore with directWrites: false flushes a durable write behind itself (fdatasync between the writes), and never one with sync: false",
  ignore: !strace && !inCI,
  async fn() {
    const durable = await traceWrite("buffered");
    const said = durable.join(", ");
    const writeFd = durable[0]!.split(" ")[1];
    assert.ok(durable.every((c) => !c.startsWith("write") || c === `write ${writeFd}`), said);
    const lastWrite = durable.lastIndexOf(`write ${writeFd}`);
    const behind = durable.slice(0, lastWrite).filter((c) => c.startsWith("fdatasync"));
    assert.ok(behind.length > 0, `a flush before the last write: ${said}`);
    // Through another handle, so the writes need not wait for it (the runtime serialises each handle's calls).
    assert.ok(behind.every((c) => c !== `fdatasync ${writeFd}`), said);
    assert.equal(durable.at(-1), `fdatasync ${writeFd}`, "the end of the file is flushed before it is published");
    const plain = await traceWrite("nosync");
    assert.ok(plain.length > 0 && plain.every((c) => c.startsWith("write ")), plain.join(", "));
  },
});

Deno.test({
  name:
    "FileStore writes a durable file around the page cache (O_DIRECT) where FFI is granted: all but its last partial block, no flush behind, its end flushed before it is published",
  ignore: (!strace && !inCI) || Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch),
  async fn() {
    const calls = await traceWrite("direct");
    const said = calls.join(", ");
    const direct = calls.filter((c) => c.startsWith("write direct "));
    assert.ok(direct.length >= 5, `the 40 MiB go out direct: ${said}`);
    // The 1000 bytes after the last whole block go through the handle, after every direct write.
    const handleWrites = calls.filter((c) => c.startsWith("write ") && !c.startsWith("write direct "));
    assert.equal(handleWrites.length, 1, said);
    assert.ok(calls.indexOf(handleWrites[0]!) > calls.lastIndexOf(direct.at(-1)!), said);
    const lastWrite = calls.indexOf(handleWrites[0]!);
    assert.deepEqual(
      calls.slice(0, lastWrite).filter((c) => c.startsWith("fdatasync")),
      [],
      `no flush behind: ${said}`,
    );
    assert.deepEqual(calls.slice(lastWrite + 1), [`fdatasync ${handleWrites[0]!.split(" ")[1]}`], said);
    // Without FFI, with sync: false, or with directWrites: false, nothing is opened O_DIRECT.
    for (const other of [await traceWrite("direct", ["-A", "--deny-ffi"]), await traceWrite("nosync")]) {
      assert.ok(other.length > 0 && other.every((c) => !c.includes("direct")), other.join(", "));
    }
  },
});

Deno.test("the strace reader joins a call another thread interrupted, whatever the width of its PID", () => {
  const log = [
    "5671  fcntl(21</d/.f.tmp>, F_DUPFD_CLOEXEC, 3 <unfinished ...>",
    "5674  fdatasync(23</d/.f.tmp> <unfinished ...>",
    "5671  <... fcntl resumed>)              = 24</d/.f.tmp>",
    "12345 fsync(5</d> <unfinished ...>",
    "12345 <... fsync resumed>) = 0",
  ].join("\n");
  const joined = [...straceLines(log)].map((l) => l.line);
  assert.equal(joined[2], "5671  fcntl(21</d/.f.tmp>, F_DUPFD_CLOEXEC, 3)              = 24</d/.f.tmp>");
  assert.equal(joined[4], "12345 fsync(5</d>) = 0");
  assert.equal(joined[1], "5674  fdatasync(23</d/.f.tmp> <unfinished ...>"); // not resumed in this log
});
