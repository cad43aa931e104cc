import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { pathToFileURL as toFileUrl } from "node:url";
import { encodeCheckpoint, loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import type { CheckpointInput, TensorInput } from "../../src/format/types.ts";
import { assertSameCheckpoint, edgeCheckpoint } from "../_util.ts";

async function sha256sum(path: string): Promise<string> {
  const out = await new Deno.Command("sha256sum", { args: [path] }).output();
  return new TextDecoder().decode(out.stdout).split(" ")[0]!;
}

for (const codec of ["binary", "json"] as const) {
  for (const compression of ["none", "gzip"] as const) {
    Deno.test(`saveCheckpoint (${codec}, ${compression}) returns the size and the digest sha256sum prints`, async () => {
      const dir = await Deno.makeTempDir();
      try {
        const path = join(dir, "a.ckpt");
        const ckpt = edgeCheckpoint();
        const r = await saveCheckpoint(path, ckpt, { codec, compression, sha256sum: true });
        assert.equal(r.bytes, (await Deno.stat(path)).size);
        assert.equal(r.sha256, await sha256sum(path));
        assertSameCheckpoint(await loadCheckpoint(path, { sha256: r.sha256 }), ckpt);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }
}

Deno.test("saveCheckpoint writes to a file: URL and to any WritableStream", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const url = toFileUrl(join(dir, "u.ckpt"));
    const a = await saveCheckpoint(url, edgeCheckpoint());
    const chunks: Uint8Array[] = [];
    const b = await saveCheckpoint(new WritableStream({ write: (c) => void chunks.push(c.slice()) }), edgeCheckpoint());
    assert.deepEqual(a, b);
    assertSameCheckpoint(await loadCheckpoint(ReadableStream.from(chunks)), edgeCheckpoint());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a failed save leaves the previous file intact and no temporary file behind", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "model.ckpt");
    const first = await saveCheckpoint(path, edgeCheckpoint(), { sha256sum: true });
    const failing = async function* (): AsyncGenerator<TensorInput> {
      yield { name: "a", dtype: "float32", shape: [1 << 20], data: new Float32Array(1 << 20) };
      throw new Error("device lost");
    };
    await assert.rejects(() => saveCheckpoint(path, { metadata: { step: 2 }, tensors: failing() }), /device lost/);
    await assert.rejects(
      () =>
        saveCheckpoint(path, {
          metadata: { step: 2 },
          tensors: [{ name: "x", dtype: "int8", shape: [2], data: new Int8Array(1) }],
        }),
      /shape \[2\] has 2 elements but data has 1/,
    );
    assert.equal(await sha256sum(path), first.sha256);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["model.ckpt"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("saveCheckpoint to a missing directory fails with NotFound and writes nothing", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(() => saveCheckpoint(join(dir, "nope", "a.ckpt"), edgeCheckpoint()), Deno.errors.NotFound);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a save killed mid-write (SIGKILL) leaves the previous checkpoint loadable", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "m.ckpt");
    const first = await saveCheckpoint(path, edgeCheckpoint(), { sha256sum: true });
    const script = `
      import { saveCheckpoint } from ${JSON.stringify(new URL("../../mod.ts", import.meta.url).href)};
      async function* slow() {
        for (let i = 0; i < 1000; i++) {
          yield { name: "t" + i, dtype: "float32", shape: [1 << 18], data: new Float32Array(1 << 18).fill(i) };
          if (i === 3) console.log("writing");
        }
      }
      await saveCheckpoint(${JSON.stringify(path)}, { metadata: { step: 9 }, tensors: slow() });
    `;
    const child = new Deno.Command(Deno.execPath(), { args: ["eval", script], stdout: "piped", stderr: "null" })
      .spawn();
    const reader = child.stdout.getReader();
    await reader.read(); // "writing": the temporary file exists and is being filled
    child.kill("SIGKILL");
    await child.status;
    reader.releaseLock();
    await child.stdout.cancel();
    assert.equal(await sha256sum(path), first.sha256);
    assertSameCheckpoint(await loadCheckpoint(path), edgeCheckpoint());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("concurrent saves never share staging buffers, and reused ones leave no stale bytes", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const big = (v: number): CheckpointInput => ({
      metadata: { step: v },
      tensors: [{ name: "w", dtype: "uint8", shape: [9 * 2 ** 20 + v], data: new Uint8Array(9 * 2 ** 20 + v).fill(v) }],
    });
    const results = await Promise.all(
      [1, 2, 3, 4].map((v) => saveCheckpoint(join(dir, `${v}.ckpt`), big(v), { sha256sum: true })),
    );
    for (const v of [1, 2, 3, 4]) {
      assert.equal(results[v - 1]!.sha256, await sha256sum(join(dir, `${v}.ckpt`)));
      assertSameCheckpoint(await loadCheckpoint(join(dir, `${v}.ckpt`)), big(v));
    }
    // A small save after big ones reuses a pair that still holds their bytes: only its own may reach the file.
    const small: CheckpointInput = {
      metadata: { step: 9 },
      tensors: [{ name: "s", dtype: "int8", shape: [3], data: new Int8Array([1, 2, 3]) }],
    };
    await saveCheckpoint(join(dir, "s.ckpt"), small);
    assertSameCheckpoint(await loadCheckpoint(join(dir, "s.ckpt")), small);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a byte-grouped save to a file, whose encoder reuses its plane buffers, writes what encodeCheckpoint gives", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // Tensors of different sizes and contents, so a plane left over from the previous tensor
    // would show: compressible weights, incompressible noise, and float16.
    const weights = (n: number, seed: number) => {
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = Math.sin(i * 0.37 + seed) * 0.02;
      return a;
    };
    const noise = new Float32Array(new Uint32Array(300_001).map((_, i) => Math.imul(i + 7, 2654435761)).buffer);
    const tensors: TensorInput[] = [
      { name: "a", dtype: "float32", shape: [400_000], data: weights(400_000, 1) },
      { name: "noise", dtype: "float32", shape: [300_001], data: noise },
      { name: "b", dtype: "float32", shape: [150_003], data: weights(150_003, 2) },
      {
        name: "h",
        dtype: "float16",
        shape: [200_000],
        data: new Uint16Array(200_000).map((_, i) => (i * 31) & 0x3fff),
      },
      { name: "c", dtype: "float32", shape: [400_000], data: weights(400_000, 3) },
    ];
    const checkpoint: CheckpointInput = { metadata: { step: 3 }, tensors };
    const path = join(dir, "g.ckpt");
    const saved = await saveCheckpoint(path, checkpoint, { compression: "bytegroup", sha256sum: true });
    const expected = new Uint8Array(
      await new Response(encodeCheckpoint(checkpoint, { compression: "bytegroup" })).arrayBuffer(),
    );
    const written = await Deno.readFile(path);
    assert.ok(written.byteLength < 0.95 * tensors.reduce((n, t) => n + t.data.byteLength, 0));
    // Compared by digest: a diff of two megabyte arrays would take minutes to print.
    assert.equal(
      createHash("sha256").update(written).digest("hex"),
      createHash("sha256").update(expected).digest("hex"),
    );
    assertSameCheckpoint(await loadCheckpoint(path, { sha256: saved.sha256 }), checkpoint);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a large save hashes the file on a worker thread and still returns exactly sha256sum's digest", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const tensors: TensorInput[] = [0, 1, 2, 3, 4].map((i) => ({
      name: `t${i}`,
      dtype: "float32",
      shape: [(14 << 20) / 4 + i],
      data: new Float32Array((14 << 20) / 4 + i).map((_, j) => j * (i + 1)),
    }));
    const path = join(dir, "big.ckpt");
    const r = await saveCheckpoint(path, { metadata: { step: 1 }, tensors }, { sha256sum: true }); // 70 MiB, known up front
    assert.equal(r.sha256, await sha256sum(path));
    const lazy = async function* () {
      yield* tensors;
    };
    const r2 = await saveCheckpoint(join(dir, "lazy.ckpt"), { metadata: { step: 1 }, tensors: lazy() }, {
      sha256sum: true,
    });
    assert.equal(r2.sha256, r.sha256, "the main-thread hash of the same bytes agrees");
    assertSameCheckpoint(await loadCheckpoint(path, { sha256: r.sha256 }), { metadata: { step: 1 }, tensors });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Runs `code` (TypeScript importing mod.ts) in a subprocess, its stdout piped through `shell` (e.g. "head -c 10"). */
async function runScript(code: string, shell = "cat"): Promise<{ code: number; stdout: string; stderr: string }> {
  const dir = await Deno.makeTempDir();
  try {
    const script = join(dir, "s.ts");
    const mod = new URL("../../mod.ts", import.meta.url).href;
    await Deno.writeTextFile(script, code.replaceAll("MOD", mod));
    const out = await new Deno.Command("bash", {
      // --config: mod.ts imports npm packages through deno.json's import map.
      args: [
        "-c",
        `set -o pipefail; "$0" run -A --quiet --config "$2" "$1" | ${shell}`,
        Deno.execPath(),
        script,
        new URL("../../deno.json", import.meta.url).pathname,
      ],
      env: { NO_COLOR: "1" },
    }).output();
    return {
      code: out.code,
      stdout: new TextDecoder().decode(out.stdout),
      stderr: new TextDecoder().decode(out.stderr),
    };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("saveCheckpoint(Deno.stdout.writable, …, { preventClose: true }) leaves stdout open; by default it closes it", async () => {
  const open = await runScript(`
    import { saveCheckpoint } from "MOD";
    await saveCheckpoint(Deno.stdout.writable, { metadata: { step: 1 }, tensors: [] }, { codec: "json", preventClose: true });
    console.log("still open");`);
  assert.equal(open.code, 0, open.stderr);
  assert.match(open.stdout, /^\{.*\n[\s\S]*\nstill open\n$/);

  const closed = await runScript(`
    import { saveCheckpoint } from "MOD";
    await saveCheckpoint(Deno.stdout.writable, { metadata: { step: 1 }, tensors: [] }, { codec: "json" });
    try { console.log("written after close"); } catch (e) { console.error("closed:", e.name); }`);
  assert.doesNotMatch(closed.stdout, /written after close/);
  assert.match(closed.stderr, /closed: BadResource/);
});

Deno.test("saveCheckpoint into a pipe whose reader went away fails with a BrokenPipe that says so", async () => {
  const r = await runScript(
    `
    import { saveCheckpoint } from "MOD";
    const data = new Float32Array(1 << 20);
    try {
      await saveCheckpoint(Deno.stdout.writable, { metadata: { step: 1 }, tensors: [{ name: "w", dtype: "float32", shape: [data.length], data }] });
    } catch (e) {
      console.error(e.constructor.name + ": " + e.message);
      Deno.exit(3);
    }`,
    "head -c 10 >/dev/null",
  );
  assert.equal(r.code, 3, r.stderr);
  assert.match(
    r.stderr,
    /^BrokenPipe: Cannot save checkpoint: the stream's reader went away after \d+ bytes had been handed to it \(broken pipe; e\.g\. piped into head\)\n$/,
  );
});

Deno.test("saveCheckpoint({ reuse }) overwrites the recycled file in place, truncates it and renames it over the target", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const old = join(dir, "step-1.ckpt");
    const big: CheckpointInput = {
      metadata: { step: 1 },
      tensors: [{ name: "w", dtype: "float32", shape: [1 << 18], data: new Float32Array(1 << 18).fill(7) }],
    };
    await saveCheckpoint(old, big);
    const inode = (await Deno.stat(old)).ino;
    const target = join(dir, "step-3.ckpt");
    const r = await saveCheckpoint(target, edgeCheckpoint(), { reuse: old });
    await assert.rejects(() => Deno.stat(old), Deno.errors.NotFound);
    const st = await Deno.stat(target);
    assert.equal(st.ino, inode, "the recycled file's inode now holds the new checkpoint");
    assert.equal(st.size, r.bytes, "truncated to the new size");
    assertSameCheckpoint(await loadCheckpoint(target, { sha256: r.digest }), edgeCheckpoint());
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["step-3.ckpt"]);
    // A file that is not there is no error: the save writes a new file.
    const again = await saveCheckpoint(join(dir, "step-4.ckpt"), edgeCheckpoint(), { reuse: join(dir, "gone.ckpt") });
    assert.equal(again.digest, r.digest);
    await assert.rejects(() => saveCheckpoint(target, edgeCheckpoint(), { reuse: target }), TypeError);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a recycled save that fails or is killed leaves the target intact and no temporary file", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const target = join(dir, "model.ckpt");
    const first = await saveCheckpoint(target, edgeCheckpoint(), { sha256sum: true });
    const failing = async function* (): AsyncGenerator<TensorInput> {
      yield { name: "a", dtype: "float32", shape: [1 << 20], data: new Float32Array(1 << 20) };
      throw new Error("device lost");
    };
    await saveCheckpoint(join(dir, "old.ckpt"), edgeCheckpoint());
    await assert.rejects(
      () => saveCheckpoint(target, { metadata: { step: 2 }, tensors: failing() }, { reuse: join(dir, "old.ckpt") }),
      /device lost/,
    );
    assert.equal(await sha256sum(target), first.sha256);
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["model.ckpt"], "the recycled file went too");
    // Killed while overwriting a recycled file: the target is untouched.
    await saveCheckpoint(join(dir, "old.ckpt"), edgeCheckpoint());
    const script = `
      import { saveCheckpoint } from ${JSON.stringify(new URL("../../mod.ts", import.meta.url).href)};
      async function* slow() {
        for (let i = 0; i < 1000; i++) {
          yield { name: "t" + i, dtype: "float32", shape: [1 << 18], data: new Float32Array(1 << 18).fill(i) };
          if (i === 3) console.log("writing");
        }
      }
      await saveCheckpoint(${JSON.stringify(target)}, { metadata: { step: 9 }, tensors: slow() }, {
        reuse: ${JSON.stringify(join(dir, "old.ckpt"))},
      });
    `;
    const child = new Deno.Command(Deno.execPath(), { args: ["eval", script], stdout: "piped", stderr: "null" })
      .spawn();
    const reader = child.stdout.getReader();
    await reader.read();
    child.kill("SIGKILL");
    await child.status;
    reader.releaseLock();
    await child.stdout.cancel();
    assert.equal(await sha256sum(target), first.sha256);
    assertSameCheckpoint(await loadCheckpoint(target), edgeCheckpoint());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
