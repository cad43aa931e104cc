import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { prng } from "../_util.ts";
import { assertOneLineError, CKPT, ckpt, indexOfText, pipeline, tempDir, writeSample } from "./_run.ts";

async function gunzip(bytes: Uint8Array): Promise<Uint8Array> {
  return await new Response(new Blob([bytes.slice()]).stream().pipeThrough(new DecompressionStream("gzip"))).bytes();
}

Deno.test("convert binary to JSON and back gives the original bytes, bit for bit", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const r1 = await ckpt(["convert", a, `${t.dir}/a.jsonl`, "--codec", "json"]);
  assert.deepEqual([r1.code, r1.out, r1.err], [0, "", ""]);
  assert.equal((await Deno.readTextFile(`${t.dir}/a.jsonl`)).split("\n")[0], '{"ckpt":"jsonl","version":1}');
  const r2 = await ckpt(["convert", `${t.dir}/a.jsonl`, `${t.dir}/back.ckpt`]);
  assert.equal(r2.code, 0, r2.err);
  assert.deepEqual(await Deno.readFile(`${t.dir}/back.ckpt`), await Deno.readFile(a));
  const back = await loadCheckpoint(`${t.dir}/a.jsonl`);
  const orig = await loadCheckpoint(a);
  assert.deepEqual(back, orig);
  // NaN payloads survive: compare the raw bytes of every tensor.
  back.tensors.forEach((x, i) => {
    const y = orig.tensors[i]!;
    assert.deepEqual(
      new Uint8Array(x.data.buffer, x.data.byteOffset, x.data.byteLength),
      new Uint8Array(y.data.buffer, y.data.byteOffset, y.data.byteLength),
    );
  });
});

Deno.test("convert --gzip writes a standard gzip stream of the same codec bytes", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const r = await ckpt(["convert", a, `${t.dir}/a.ckpt.gz`, "--gzip"]);
  assert.equal(r.code, 0, r.err);
  const gz = await Deno.readFile(`${t.dir}/a.ckpt.gz`);
  assert.deepEqual([gz[0], gz[1]], [0x1f, 0x8b]);
  assert.deepEqual(await gunzip(gz), await Deno.readFile(a));
  const j = await ckpt(["convert", `${t.dir}/a.ckpt.gz`, "-", "-c", "json", "-z"]);
  assert.equal(j.code, 0, j.err);
  const text = new TextDecoder().decode(await gunzip(j.stdout));
  assert.match(text, /^\{"ckpt":"jsonl","version":1\}\n\{"metadata":\{"step":100/);
});

Deno.test("convert - - --codec json streams JSON Lines into a second process that verifies them", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const { first, second } = await pipeline(["convert", "-", "-", "--codec", "json"], ["verify", "-"], {
    stdin: await Deno.readFile(a),
  });
  assert.deepEqual([first.code, first.err], [0, ""]);
  assert.deepEqual([second.code, second.err], [0, ""]);
  assert.match(second.out, /^ok stdin: json, step 100, 4 tensors, /);
  // Every line of the JSON output is a JSON value, and nothing else reaches stdout.
  const r = await ckpt(["convert", "-", "-", "--codec", "json"], { stdin: await Deno.readFile(a) });
  const lines = r.out.trimEnd().split("\n");
  for (const line of lines) JSON.parse(line);
  assert.deepEqual(
    lines.map((l) => Object.keys(JSON.parse(l))[0]).filter((k) => k === "tensor"),
    ["tensor", "tensor", "tensor", "tensor"],
  );
});

Deno.test("a pipe into convert - OUT writes the file atomically with the same tensors", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const { first, second } = await pipeline(["convert", a, "-", "--codec", "json", "--gzip"], [
    "convert",
    "-",
    `${t.dir}/out.ckpt`,
  ]);
  assert.deepEqual([first.code, first.err, second.code, second.err, second.out], [0, "", 0, "", ""]);
  assert.deepEqual(await Deno.readFile(`${t.dir}/out.ckpt`), await Deno.readFile(a));
});

Deno.test("convert of a damaged checkpoint leaves an existing output untouched and no temporary files", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const bytes = await Deno.readFile(a);
  const at = indexOfText(bytes, '{"name":"bn/mean"');
  bytes[at + 10]! ^= 0x20; // "bn/mean" becomes "bN/mean": its record digest no longer matches
  await Deno.writeFile(`${t.dir}/bad.ckpt`, bytes);
  await Deno.writeTextFile(`${t.dir}/out.ckpt`, "previous contents");
  const r = await ckpt(["convert", `${t.dir}/bad.ckpt`, `${t.dir}/out.ckpt`, "--codec", "json"]);
  assertOneLineError(r, 4, /^ckpt convert: .*bad\.ckpt: Checksum mismatch for tensor "bN\/mean"/);
  assert.equal(await Deno.readTextFile(`${t.dir}/out.ckpt`), "previous contents");
  const names = [];
  for await (const e of Deno.readDir(t.dir)) names.push(e.name);
  assert.deepEqual(names.sort(), ["a.ckpt", "bad.ckpt", "out.ckpt"]);
});

Deno.test("convert of a damaged checkpoint to stdout stops early with output no reader accepts", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const bytes = await Deno.readFile(a);
  const cut = bytes.subarray(0, bytes.length - 100);
  const r = await ckpt(["convert", "-", "-", "--codec", "json"], { stdin: cut });
  assert.equal(r.code, 4);
  assert.match(r.err, /^ckpt convert: stdin: Cannot decode checkpoint: [^\n]*\n$/);
  const again = await ckpt(["verify", "-"], { stdin: r.stdout });
  assertOneLineError(again, 4, /^ckpt verify: stdin: Cannot decode checkpoint/);
});

Deno.test("convert reports unwritable targets and missing inputs in one line with exit code 3", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  assertOneLineError(
    await ckpt(["convert", a, `${t.dir}/no/such/dir/out.ckpt`]),
    3,
    /Cannot write ".*out\.ckpt": directory ".*dir" does not exist/,
  );
  assertOneLineError(await ckpt(["convert", a, t.dir]), 3, /Cannot write ".*": it is a directory/);
  assertOneLineError(await ckpt(["convert", a, `${a}/out.ckpt`]), 3, /Cannot write ".*out\.ckpt": Not a directory$/m);
  assertOneLineError(
    await ckpt(["convert", a, "/proc/ckpt-cli-test.ckpt"]),
    3,
    /^ckpt convert: Cannot write "\/proc\/ckpt-cli-test\.ckpt": /,
  );
  assertOneLineError(
    await ckpt(["convert", `${t.dir}/missing.ckpt`, `${t.dir}/out.ckpt`]),
    3,
    /Cannot read ".*missing\.ckpt": No such file/,
  );
  // A read-only directory (root writes there anyway, so the check runs only where it can fail).
  await Deno.mkdir(`${t.dir}/ro`, { mode: 0o555 });
  const writable = await Deno.writeTextFile(`${t.dir}/ro/probe`, "").then(() => true, () => false);
  if (!writable) {
    assertOneLineError(
      await ckpt(["convert", a, `${t.dir}/ro/out.ckpt`]),
      3,
      /Cannot write ".*out\.ckpt": Permission denied/,
    );
  }
});

Deno.test("convert exits quietly with 141 when the reader of stdout goes away", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/big.ckpt`;
  await saveCheckpoint(a, {
    metadata: { step: 1 },
    tensors: [{ name: "w", dtype: "float64", shape: [2 ** 18], data: new Float64Array(2 ** 18).map((_, i) => i / 3) }],
  });
  const child = new Deno.Command(CKPT[0]!, {
    args: [...CKPT.slice(1), "convert", a, "-", "--codec", "json"],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.getReader();
  await reader.read();
  await reader.cancel();
  const status = await child.status;
  const err = await new Response(child.stderr).text();
  assert.equal(status.code, 141);
  assert.equal(err, "");
});

/**
 * Peak resident memory (VmHWM) of a running process, sampled by a shell loop until it exits.
 * (Deno reads /proc only under --allow-all; the tests run with the task's narrower permissions.)
 */
function watchPeak(pid: number): { stop(): Promise<number> } {
  const loop = "while [ -e /proc/$1 ]; do grep VmHWM /proc/$1/status 2>/dev/null; sleep 0.02; done";
  const watcher = new Deno.Command("sh", { args: ["-c", loop, "sh", String(pid)], stdout: "piped" }).output();
  return {
    async stop() {
      const text = new TextDecoder().decode((await watcher).stdout);
      return Math.max(0, ...[...text.matchAll(/VmHWM:\s+(\d+) kB/g)].map((m) => Number(m[1]) * 1024));
    },
  };
}

Deno.test({
  name: "convert streams 512 MiB through a pipe between two processes in bounded memory, bytes unchanged",
  ignore: Deno.build.os !== "linux",
  async fn() {
    await using t = await tempDir();
    const src = `${t.dir}/big.ckpt`;
    const mib = 512;
    async function* tensors() {
      for (let i = 0; i < mib / 16; i++) {
        const data = new Float32Array(4 * 2 ** 20);
        for (let j = 0; j < data.length; j += 997) data[j] = i * 0.5 + j;
        yield { name: `layer${i}/kernel`, dtype: "float32" as const, shape: [2048, 2048], data };
      }
    }
    const saved = await saveCheckpoint(src, { metadata: { step: 1 }, tensors: tensors() }, {
      sync: false,
      sha256sum: true,
    });
    const spawn = (args: string[]) =>
      new Deno.Command(CKPT[0]!, {
        args: [...CKPT.slice(1), ...args],
        stdin: "piped",
        stdout: "piped",
        stderr: "piped",
      })
        .spawn();
    const first = spawn(["convert", "-", "-"]);
    const second = spawn(["convert", "-", "-"]);
    const peaks = [watchPeak(first.pid), watchPeak(second.pid)];
    const file = await Deno.open(src);
    const feeding = file.readable.pipeTo(first.stdin);
    const piping = first.stdout.pipeTo(second.stdin);
    const hash = createHash("sha256");
    let bytes = 0;
    await second.stdout.pipeTo(
      new WritableStream({
        write(c) {
          hash.update(c);
          bytes += c.byteLength;
        },
      }),
    );
    await Promise.all([feeding, piping]);
    const [s1, s2] = await Promise.all([first.status, second.status]);
    const [p1, p2] = await Promise.all(peaks.map((p) => p.stop()));
    const errs = await Promise.all([new Response(first.stderr).text(), new Response(second.stderr).text()]);
    assert.deepEqual([s1.code, s2.code, ...errs], [0, 0, "", ""]);
    assert.equal(bytes, saved.bytes);
    assert.equal(hash.digest("hex"), saved.sha256, "a binary checkpoint re-encoded through a pipe keeps its bytes");
    console.log(`peak RSS of each convert: ${(p1! / 2 ** 20).toFixed(0)} MiB, ${(p2! / 2 ** 20).toFixed(0)} MiB`);
    for (const peak of [p1!, p2!]) assert.ok(peak > 0 && peak < (mib / 2) * 2 ** 20, `peak RSS ${peak} bytes`);
  },
});

Deno.test("convert --bytegroup writes byte-grouped float tensors that load back bit for bit and convert back", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const r = await ckpt(["convert", a, `${t.dir}/b.ckpt`, "--bytegroup"]);
  assert.equal(r.code, 0, r.err);
  const b = await Deno.readFile(`${t.dir}/b.ckpt`);
  assert.equal(b[12], 1, "header flag 1 (byte-grouped bodies)");
  assert.deepEqual(await loadCheckpoint(`${t.dir}/b.ckpt`), await loadCheckpoint(a));
  const back = await ckpt(["convert", `${t.dir}/b.ckpt`, `${t.dir}/c.ckpt`]);
  assert.equal(back.code, 0, back.err);
  assert.deepEqual(await Deno.readFile(`${t.dir}/c.ckpt`), await Deno.readFile(a));
  const both = await ckpt(["convert", a, `${t.dir}/d.ckpt`, "--bytegroup", "--gzip"]);
  assert.equal(both.code, 2);
  assert.match(both.err, /--gzip and --bytegroup cannot be combined/);
  const json = await ckpt(["convert", a, `${t.dir}/d.jsonl`, "--bytegroup", "-c", "json"]);
  assert.equal(json.code, 2);
  assert.match(json.err, /--bytegroup needs the binary codec/);
});

Deno.test("convert --help says when bytegroup and when gzip is smaller, and both claims hold", async () => {
  const help = await ckpt(["convert", "--help"]);
  assert.match(
    help.out,
    /--bytegroup .*on large float weights smaller than gzip.*on small ones \(kilobytes a tensor\) gzip is smaller/s,
  );
  assert.doesNotMatch(help.out, /\(smaller than gzip/);
  const dir = await Deno.makeTempDir();
  try {
    const random = prng(7);
    const normal = () => 0.02 * Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random()); // N(0, 0.02)
    const sizes = async (name: string, tensors: { name: string; elements: number }[]) => {
      const path = `${dir}/${name}.ckpt`;
      await saveCheckpoint(path, {
        metadata: { step: 1 },
        tensors: tensors.map((t) => ({
          name: t.name,
          dtype: "float32" as const,
          shape: [t.elements],
          data: Float32Array.from({ length: t.elements }, normal),
        })),
      });
      for (const flag of ["--gzip", "--bytegroup"]) {
        const r = await ckpt(["convert", path, `${path}${flag}`, flag]);
        assert.equal(r.code, 0, r.err);
      }
      return {
        gzip: (await Deno.stat(`${path}--gzip`)).size,
        bytegroup: (await Deno.stat(`${path}--bytegroup`)).size,
      };
    };
    // Like the train demo's: many tensors of 128 B and two of 4 KiB.
    const small = await sizes("small", [
      ...Array.from({ length: 16 }, (_, i) => ({ name: `t${i}`, elements: 32 })),
      { name: "k1", elements: 1024 },
      { name: "k2", elements: 1024 },
    ]);
    assert.ok(small.gzip < small.bytegroup, `small: gzip ${small.gzip} B, bytegroup ${small.bytegroup} B`);
    const large = await sizes("large", [{ name: "w", elements: 1 << 20 }]);
    assert.ok(large.bytegroup < large.gzip, `large: gzip ${large.gzip} B, bytegroup ${large.bytegroup} B`);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
