// Keeps one browser of one engine running for a whole `deno test` run, so that every test file
// (each runs in its own isolate) connects to the same browser instead of starting its own. Started
// detached by the first test file that needs the engine (tests/web/_browser.ts); it writes how to
// reach the browser to a state file, then watches the test process and, once that is gone, closes
// the browser and stops what it started (Xvfb and WebKitWebDriver for WebKit), by pid.
//
//   deno run -A tests/web/_browser_host.ts KIND TEST_PID STATE_FILE
//
// KIND is chromium, firefox, webkit (Safari 26's features) or webkit-legacy (Safari before 26: no
// FileSystemWritableStream, so no createWritable).
import puppeteer, { type Browser } from "puppeteer-core";
import WebDriver from "webdriver";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { locate } from "./_engines.ts";

/** How a test file reaches the browser. */
export type HostState =
  | { kind: "chromium" | "firefox"; endpoint: string; version: string }
  | { kind: "webkit" | "webkit-legacy"; port: number; sessionId: string; version: string; capabilities: unknown }
  | { error: string };

/** Host kinds: the engines, and WebKit as Safari before 26 had it. */
export type HostKind = "chromium" | "firefox" | "webkit" | "webkit-legacy";

/** Flags for headless Chromium here: no sandbox (root), SwiftShader WebGL, WebGPU when offered. */
export const CHROMIUM_ARGS: readonly string[] = [
  "--no-sandbox",
  "--use-angle=swiftshader",
  "--enable-unsafe-swiftshader",
  "--enable-unsafe-webgpu",
  "--disable-dev-shm-usage",
];

/**
 * The WebKit features Safari ships and WebKitGTK ships switched off: OPFS, sync access handles,
 * the Storage API and its estimate(), and (Safari 26) FileSystemWritableStream for createWritable.
 */
export const WEBKIT_FEATURES: Record<"webkit" | "webkit-legacy", string> = {
  webkit: "+FileSystem,+AccessHandle,+StorageAPI,+StorageAPIEstimate,+FileSystemWritableStream",
  "webkit-legacy": "+FileSystem,+AccessHandle,+StorageAPI,+StorageAPIEstimate,-FileSystemWritableStream",
};

const BROWSER_PY = fileURLToPath(new URL("./webkit/browser.py", import.meta.url));
const LONG = 600_000; // this machine is slow and shared: the protocols wait long

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function waitFor<T>(what: string, f: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      const v = await f();
      if (v !== undefined) return v;
    } catch (e) {
      if (Date.now() > end) throw e;
    }
    if (Date.now() > end) throw new Error(`${what} did not come up within ${ms / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A started browser: its state for the test files and how to stop all of it. */
interface Started {
  state: HostState;
  stop(): Promise<void>;
}

async function startPuppeteer(kind: "chromium" | "firefox", dir: string): Promise<Started> {
  const { paths } = locate(kind);
  const browser: Browser = await puppeteer.launch({
    ...(kind === "firefox" ? { browser: "firefox" as const } : { args: [...CHROMIUM_ARGS] }),
    executablePath: paths[kind]!,
    headless: true,
    userDataDir: dir,
    protocolTimeout: LONG,
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
  });
  const proc = browser.process()!;
  const state: HostState = { kind, endpoint: browser.wsEndpoint(), version: await browser.version() };
  // Firefox takes one WebDriver BiDi session at a time: the test files' connections make theirs.
  if (kind === "firefox") await browser.disconnect();
  return {
    state,
    async stop() {
      if (kind === "chromium") await browser.close().catch(() => {});
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (proc.exitCode === null) proc.kill("SIGKILL");
      }
    },
  };
}

async function webkitVersion(python: string): Promise<string> {
  const out = await new Deno.Command(python, {
    args: [
      "-c",
      'import gi; gi.require_version("WebKit2", "4.1"); from gi.repository import WebKit2 as W; ' +
      'print(f"{W.get_major_version()}.{W.get_minor_version()}.{W.get_micro_version()}")',
    ],
    stderr: "null",
  }).output();
  return `WebKitGTK ${new TextDecoder().decode(out.stdout).trim()}`;
}

async function startWebKit(kind: "webkit" | "webkit-legacy", dir: string): Promise<Started> {
  const { paths } = locate("webkit");
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const s of stops.reverse()) await s().catch(() => {});
  };
  const kill = (child: Deno.ChildProcess) => async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* gone */ }
    await child.status;
  };
  try {
    // Xvfb picks a free display and writes its number to stdout (-displayfd 1).
    const xvfb = new Deno.Command(paths.xvfb!, {
      args: ["-displayfd", "1", "-screen", "0", "1280x1024x24", "-nolisten", "tcp"],
      stdout: "piped",
      stderr: "null",
    }).spawn();
    stops.push(kill(xvfb));
    const reader = xvfb.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let out = "";
    while (!/\n/.test(out)) {
      const r = await reader.read();
      if (r.done) throw new Error("Xvfb exited before it named its display");
      out += r.value;
    }
    reader.releaseLock();
    xvfb.stdout.cancel().catch(() => {});
    const display = `:${out.trim()}`;
    const port = freePort();
    // WebKitGTK 2.50 keeps each createWritable()'s data in a FileSystemWritableStream-XXXXXX
    // directory under TMPDIR and never removes it (2009 of them, 50 GiB, filled this machine's
    // disk after a day of runs): the engine gets a TMPDIR of its own, removed with the session.
    const tmp = `${dir}/tmp`;
    await Deno.mkdir(tmp, { recursive: true });
    const driver = new Deno.Command(paths.webdriver!, {
      args: [`--port=${port}`, "--host=127.0.0.1"],
      env: { DISPLAY: display, TMPDIR: tmp },
      stdout: "null",
      stderr: "null",
    }).spawn();
    stops.push(kill(driver));
    await waitFor("WebKitWebDriver", async () => (await fetch(`http://127.0.0.1:${port}/status`)).ok || undefined);
    const profile = `${dir}/profile`;
    const capabilities = {
      "wdio:enforceWebDriverClassic": true,
      timeouts: { script: LONG, pageLoad: LONG, implicit: 0 },
      "webkitgtk:browserOptions": {
        binary: paths.python!,
        args: [BROWSER_PY, "--profile", profile, "--features", WEBKIT_FEATURES[kind]],
      },
    };
    const client = await WebDriver.newSession({
      hostname: "127.0.0.1",
      port,
      logLevel: "silent",
      connectionRetryTimeout: LONG,
      connectionRetryCount: 0,
      capabilities: capabilities as never,
    });
    stops.push(async () => void await client.deleteSession());
    return {
      state: {
        kind,
        port,
        sessionId: client.sessionId,
        version: await webkitVersion(paths.python!),
        capabilities: client.capabilities,
      },
      stop: stopAll,
    };
  } catch (e) {
    await stopAll();
    throw e;
  }
}

function alive(pid: number): boolean {
  try {
    Deno.statSync(`/proc/${pid}`);
    return true;
  } catch {
    return false;
  }
}

async function writeState(file: string, state: HostState): Promise<void> {
  await Deno.writeTextFile(`${file}.tmp`, JSON.stringify(state));
  await Deno.rename(`${file}.tmp`, file);
}

if (import.meta.main) {
  const [kind, pidText, stateFile] = Deno.args as [HostKind, string, string];
  const testPid = Number(pidText);
  const dir = await Deno.makeTempDir({ prefix: `ckpt-web-${kind}-` });
  let started: Started | undefined;
  try {
    started = kind === "chromium" || kind === "firefox"
      ? await startPuppeteer(kind, dir)
      : await startWebKit(kind, dir);
    await writeState(stateFile, started.state);
  } catch (e) {
    await writeState(stateFile, { error: `${kind} did not start: ${(e as Error)?.stack ?? e}` });
  }
  while (started && alive(testPid)) await new Promise((r) => setTimeout(r, 250));
  await started?.stop();
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  // The run's state directory goes with its last browser.
  for (const f of [stateFile, stateFile.replace(/\.json$/, ".starting")]) await Deno.remove(f).catch(() => {});
  await Deno.remove(dirname(stateFile)).catch(() => {});
  Deno.exit(0);
}
