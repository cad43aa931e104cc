import assert from "node:assert/strict";
import { main } from "../../src/cli/main.ts";
import { assertOneLineError, CKPT, ckpt, tempDir, writeSample } from "./_run.ts";
import { componentTest } from "../_ci.ts";

const COMMANDS = ["inspect", "verify", "convert", "diff", "ls"];

Deno.test("ckpt --help lists every command with examples and exit codes, on stdout", async () => {
  const r = await ckpt(["--help"]);
  assert.equal(r.code, 0);
  assert.equal(r.err, "");
  for (const c of COMMANDS) assert.match(r.out, new RegExp(`^  ${c} `, "m"));
  assert.match(r.out, /Examples:/);
  assert.match(r.out, /Exit codes:/);
});

for (const c of COMMANDS) {
  Deno.test(`ckpt ${c} --help shows usage, options, examples and exit codes`, async () => {
    for (const args of [[c, "--help"], [c, "-h"], ["help", c]]) {
      const r = await ckpt(args);
      assert.equal(r.code, 0, args.join(" "));
      assert.equal(r.err, "");
      assert.match(r.out, new RegExp(`^Usage: ckpt ${c} `));
      assert.match(r.out, /\nOptions:\n[\s\S]*--help[\s\S]*\nExamples:\n {2}ckpt /);
      assert.match(r.out, /\nExit codes:\n\s+0 {2}success/);
    }
  });
}

Deno.test("ckpt without a command prints the help on stderr and exits 2", async () => {
  const r = await ckpt([]);
  assert.equal(r.code, 2);
  assert.equal(r.out, "");
  assert.match(r.err, /^Usage: ckpt <command>/);
});

Deno.test("ckpt --version prints the version", async () => {
  const r = await ckpt(["--version"]);
  assert.equal(r.code, 0);
  assert.match(r.out, /^ckpt \d+\.\d+\.\d+\n$/);
});

Deno.test("ckpt reports each usage error as one line with exit code 2", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  assertOneLineError(await ckpt(["bogus"]), 2, /^ckpt: unknown command "bogus"/);
  assertOneLineError(await ckpt(["inspect", "--nope", a]), 2, /^ckpt inspect: unknown option '--nope'/);
  assertOneLineError(await ckpt(["inspect"]), 2, /^ckpt inspect: missing argument: expected FILE\|-/);
  assertOneLineError(await ckpt(["inspect", a, a]), 2, /unexpected argument/);
  assertOneLineError(await ckpt(["diff", a]), 2, /^ckpt diff: missing argument/);
  assertOneLineError(
    await ckpt(["convert", a, "x", "--codec", "xml"]),
    2,
    /--codec must be binary, json, safetensors or tfjs, got "xml"/,
  );
  assertOneLineError(await ckpt(["convert", a, "x", "--codec"]), 2, /argument missing/);
  assertOneLineError(await ckpt(["diff", a, a, "--tolerance", "abc"]), 2, /--tolerance must be a non-negative number/);
  assertOneLineError(await ckpt(["diff", "-", "-"]), 2, /only one of A and B can be standard input/);
  assertOneLineError(await ckpt(["verify", "--sha256", "xyz", a]), 2, /--sha256 must be 64 hex digits/);
  assertOneLineError(await ckpt(["--nope"]), 2, /^ckpt: unknown option '--nope'/);
});

Deno.test("ckpt shows a stack trace only with --debug", async () => {
  await using t = await tempDir();
  const bad = `${t.dir}/bad.ckpt`;
  await Deno.writeTextFile(bad, "not a checkpoint at all");
  const plain = await ckpt(["inspect", bad]);
  assertOneLineError(plain, 4, /unrecognised format/);
  for (const args of [["--debug", "inspect", bad], ["inspect", "--debug", bad]]) {
    const debug = await ckpt(args);
    assert.equal(debug.code, 4);
    assert.match(debug.err, /^ckpt inspect: [^\n]*unrecognised format[^\n]*\n/);
    assert.match(debug.err, /\n\s+at /, "a stack trace follows with --debug");
    assert.match(debug.err, /\nCaused by: SyntaxError: Cannot decode checkpoint: unrecognised format/);
  }
  const verify = await ckpt(["verify", "--debug", bad]);
  assert.equal(verify.code, 4);
  assert.match(verify.err, /^ckpt verify: [^\n]*unrecognised format[^\n]*\n[\s\S]*\n\s+at /);
});

Deno.test("main refuses to read a checkpoint from a terminal or write binary to one", async () => {
  let err = "";
  const stderr = new WritableStream<Uint8Array>({ write: (c) => void (err += new TextDecoder().decode(c)) });
  assert.equal(await main(["verify", "-"], { stderr, stdinIsTerminal: true }), 2);
  assert.match(err, /^ckpt verify: refusing to read a checkpoint from a terminal/);
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  err = "";
  const stdout = new WritableStream<Uint8Array>({ write: () => assert.fail("nothing may reach the terminal") });
  assert.equal(await main(["convert", a, "-"], { stdout, stderr, stdoutIsTerminal: true }), 2);
  assert.match(err, /^ckpt convert: refusing to write binary data to a terminal/);
});

Deno.test("main draws progress only when stderr is a terminal", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  // A slow pipe: half the bytes, a pause longer than the progress delay, then the rest.
  const bytes = await Deno.readFile(a);
  const slow = () =>
    new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(bytes.slice(0, 100));
        await new Promise((r) => setTimeout(r, 700));
        c.enqueue(bytes.slice(100));
        c.close();
      },
    });
  let err = "";
  const stderr = new WritableStream<Uint8Array>({ write: (c) => void (err += new TextDecoder().decode(c)) });
  const stdout = new WritableStream<Uint8Array>();
  assert.equal(await main(["verify", "-"], { stdin: slow, stdout, stderr, stderrIsTerminal: false }), 0);
  assert.equal(err, "", "nothing on stderr when it is not a terminal");
});

Deno.test("main draws bytes and rate on stderr when it is a terminal, and clears the line", async () => {
  await using t = await tempDir();
  const a = `${t.dir}/a.ckpt`;
  await writeSample(a);
  const bytes = await Deno.readFile(a);
  const slow = () =>
    new ReadableStream<Uint8Array>({
      async start(c) {
        c.enqueue(bytes.slice(0, 100));
        await new Promise((r) => setTimeout(r, 700));
        c.enqueue(bytes.slice(100));
        c.close();
      },
    });
  let err = "";
  let out = "";
  const stderr = new WritableStream<Uint8Array>({ write: (c) => void (err += new TextDecoder().decode(c)) });
  const stdout = new WritableStream<Uint8Array>({ write: (c) => void (out += new TextDecoder().decode(c)) });
  assert.equal(await main(["verify", "-"], { stdin: slow, stdout, stderr, stderrIsTerminal: true }), 0);
  assert.ok(err.startsWith("\r\x1b[K"), "each draw starts by clearing the line");
  assert.match(err, /reading stdin: [\d.]+ (?:KiB|B) \([\d.]+ (?:KiB|B)\/s\)/);
  assert.ok(err.endsWith("\r\x1b[K"), "the progress line is cleared at the end");
  assert.match(out, /^ok stdin: binary, step 100, 4 tensors/);
});

/** Whether util-linux `script` (a pseudo-terminal for a command) is installed. */
const hasScript = (() => {
  try {
    return new Deno.Command("script", { args: ["--version"], stdout: "null", stderr: "null" }).outputSync().success;
  } catch {
    return false;
  }
})();

componentTest({
  name: "the real program draws progress when stderr is a terminal and stays silent on a pipe",
  async fn() {
    await using t = await tempDir();
    const a = `${t.dir}/a.ckpt`;
    await writeSample(a);
    const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
    const slow = `(head -c 100 ${quote(a)}; sleep 3; tail -c +101 ${quote(a)}) | ${CKPT.map(quote).join(" ")} verify -`;
    // On a pseudo-terminal (stdout and stderr both go to it): the progress line, then the result.
    const tty = await new Deno.Command("script", {
      args: ["-qec", slow, "/dev/null"],
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    const screen = new TextDecoder().decode(tty.stdout);
    assert.equal(tty.code, 0, screen);
    assert.ok(screen.startsWith("\r\x1b[Kreading stdin: "), JSON.stringify(screen));
    assert.match(screen, /reading stdin: [\d.]+ (?:KiB|B) \([\d.]+ (?:KiB|B)\/s\)/);
    assert.ok(
      screen.includes("\r\x1b[Kok stdin: binary, step 100, 4 tensors"),
      "the line is cleared before the result",
    );
    // The same slow input with stderr on a pipe: nothing there.
    const piped = await new Deno.Command("sh", { args: ["-c", slow], stdout: "piped", stderr: "piped" }).output();
    assert.equal(piped.code, 0);
    assert.equal(new TextDecoder().decode(piped.stderr), "");
    assert.match(new TextDecoder().decode(piped.stdout), /^ok stdin: binary, step 100, 4 tensors/);
  },
}, hasScript ? undefined : "no util-linux `script` here (a pseudo-terminal for the program)");
