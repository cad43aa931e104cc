// Real signals to real processes (Deno and Node), and a real orphan.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { exitStatus, onOrphaned, onPageHidden, onSignal, signalsSupported } from "../../src/runtime/signals.ts";

const CHILD = fileURLToPath(new URL("./_signal_child.ts", import.meta.url));

/** Reads `child`'s stdout line by line, calling `onLine` until it returns true. */
async function lines(
  stream: ReadableStream<Uint8Array<ArrayBuffer>>,
  onLine: (line: string) => boolean | void,
): Promise<string[]> {
  const seen: string[] = [];
  let pending = "";
  for await (const chunk of stream.pipeThrough(new TextDecoderStream())) {
    pending += chunk;
    const parts = pending.split("\n");
    pending = parts.pop()!;
    for (const line of parts) {
      seen.push(line);
      if (onLine(line)) return seen;
    }
  }
  return seen;
}

Deno.test("onSignal turns SIGTERM and SIGINT into calls, and the child exits 143 and 130 as it chose", async () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    const child = new Deno.Command(Deno.execPath(), { args: ["run", CHILD, "listen", signal], stdout: "piped" })
      .spawn();
    let sent = 0;
    const seen = await lines(child.stdout, (line) => {
      if (line === "ready" || line === `got ${signal}`) {
        if (sent++ < 2) child.kill(signal);
      }
    });
    const status = await child.status;
    assert.deepEqual(seen, ["ready", `got ${signal}`, `got ${signal}`]);
    assert.equal(status.code, exitStatus(signal));
  }
});

Deno.test("onSignal works the same under Node.js, without Deno", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // Node 20 runs plain JavaScript: strip the module's types with esbuild, as a package build would.
    const { transform } = await import("esbuild"); // tools.imports.json, as `deno task test` runs it
    const source = await Deno.readTextFile(new URL("../../src/runtime/signals.ts", import.meta.url));
    const { code } = await transform(source, { loader: "ts", format: "esm" });
    await Deno.writeTextFile(`${dir}/signals.mjs`, code);
    await Deno.writeTextFile(
      `${dir}/main.mjs`,
      `import { onSignal, exitProcess, exitStatus, signalsSupported } from "./signals.mjs";
       if (typeof Deno !== "undefined" || !signalsSupported()) throw new Error("not Node");
       onSignal("SIGTERM", (s) => { console.log("got " + s); exitProcess(exitStatus(s)); });
       console.log("ready"); setInterval(() => {}, 1000);`,
    );
    const child = new Deno.Command("node", {
      args: [`${dir}/main.mjs`],
      stdout: "piped",
      env: { PATH: "/usr/bin:/bin" },
    })
      .spawn();
    const seen = await lines(child.stdout, (line) => {
      if (line === "ready") child.kill("SIGTERM");
    });
    assert.deepEqual(seen, ["ready", "got SIGTERM"]);
    assert.equal((await child.status).code, 143);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("onOrphaned tells a process that its parent was killed with SIGKILL", async () => {
  const parent = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", "--allow-run", CHILD, "orphan"],
    stdout: "piped",
  }).spawn();
  let grandchild = 0;
  const seen = await lines(parent.stdout, (line) => {
    grandchild = Number(/^grandchild (\d+)$/.exec(line)?.[1] ?? grandchild);
    if (line === "watching") parent.kill("SIGKILL");
    return line.startsWith("orphaned");
  });
  await parent.status;
  assert.ok(grandchild > 0, seen.join("\n"));
  assert.deepEqual(seen.slice(-2), ["watching", `orphaned ${parent.pid}`]);
});

Deno.test("signals: bad names and handlers are TypeErrors, and the exit statuses are 128 + the signal", () => {
  assert.ok(signalsSupported());
  assert.throws(() => onSignal("SIGKILL" as "SIGTERM", () => {}), /Cannot listen to signal "SIGKILL": expected one of/);
  assert.throws(() => onSignal("SIGTERM", "x" as unknown as () => void), TypeError);
  assert.throws(() => onOrphaned(() => {}, 0), RangeError);
  assert.deepEqual(["SIGHUP", "SIGINT", "SIGTERM"].map((s) => exitStatus(s as "SIGTERM")), [129, 130, 143]);
  // Outside a page there is nothing to watch; a no-op comes back.
  const stop = onPageHidden(() => {});
  stop();
  stop();
});
