// The browser engines the web tests run in, and whether each is here. Chromium and Firefox ESR
// are driven by puppeteer-core (CDP and WebDriver BiDi); WebKit by WebKitWebDriver (WebKitGTK's
// W3C WebDriver server) through the `webdriver` client, in a small WebKitGTK browser of ours
// (tests/web/webkit/browser.py) under Xvfb. CKPT_BROWSERS=chromium,firefox picks engines; an
// engine that is not installed skips with one line, but fails in CI (CI set).
import { IN_CI } from "../_ci.ts";

/** A browser engine. */
export type Engine = "chromium" | "firefox" | "webkit";

/** Every engine, in the order the tests run them. */
export const ENGINES: readonly Engine[] = ["chromium", "firefox", "webkit"];

/** Where Debian puts each program (an env var overrides: CHROMIUM, FIREFOX, WEBKIT_WEBDRIVER). */
const CANDIDATES: Record<string, string[]> = {
  chromium: ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"],
  firefox: ["/usr/bin/firefox-esr", "/usr/bin/firefox"],
  webdriver: ["/usr/bin/WebKitWebDriver"],
  xvfb: ["/usr/bin/Xvfb"],
  // Debian's own python3: python3-gi and gir1.2-webkit2-4.1 are installed for it, not for a pyenv one.
  python: ["/usr/bin/python3"],
  typelib: [
    "/usr/lib/x86_64-linux-gnu/girepository-1.0/WebKit2-4.1.typelib",
    "/usr/lib/aarch64-linux-gnu/girepository-1.0/WebKit2-4.1.typelib",
  ],
  gi: ["/usr/lib/python3/dist-packages/gi/__init__.py"],
};
const ENV: Record<string, string> = { chromium: "CHROMIUM", firefox: "FIREFOX", webdriver: "WEBKIT_WEBDRIVER" };

function find(what: string): string | undefined {
  const env = ENV[what] ? Deno.env.get(ENV[what]!) : undefined;
  for (const p of env ? [env] : CANDIDATES[what]!) {
    try {
      if (Deno.statSync(p).isFile) return p;
    } catch { /* not here */ }
  }
  return undefined;
}

/** The programs an engine needs, by name, and the Debian packages that provide them. */
const NEEDS: Record<Engine, [string, string][]> = {
  chromium: [["chromium", "chromium"]],
  firefox: [["firefox", "firefox-esr"]],
  webkit: [
    ["webdriver", "webkit2gtk-driver"],
    ["xvfb", "xvfb"],
    ["python", "python3"],
    ["gi", "python3-gi"],
    ["typelib", "gir1.2-webkit2-4.1"],
  ],
};

/** The executables found for an engine, or what is missing (as Debian package names). */
export function locate(engine: Engine): { paths: Record<string, string>; missing: string[] } {
  const paths: Record<string, string> = {};
  const missing: string[] = [];
  for (const [what, pkg] of NEEDS[engine]) {
    const p = find(what);
    if (p) paths[what] = p;
    else missing.push(pkg);
  }
  return { paths, missing };
}

/** Whether this run is CI (any truthy `CI`): a missing engine then fails its tests instead of skipping them. */
export { IN_CI };

function selected(): Engine[] {
  const env = Deno.env.get("CKPT_BROWSERS");
  if (!env) return [...ENGINES];
  const names = env.split(",").map((s) => s.trim()).filter(Boolean);
  for (const n of names) {
    if (!ENGINES.includes(n as Engine)) throw new TypeError(`CKPT_BROWSERS: unknown engine "${n}" (${ENGINES})`);
  }
  return names as Engine[];
}

/** The engines this run tests (CKPT_BROWSERS, else all three). */
export const SELECTED: readonly Engine[] = selected();

/** Whether tests in `engine` run: it is here, or CI demands it (then they fail without it). */
export function runs(engine: Engine): boolean {
  return SELECTED.includes(engine) && (IN_CI || locate(engine).missing.length === 0);
}

const noted = new Set<Engine>();

/** Prints, once per engine and test file, why that engine's tests are skipped. */
export function noteSkip(engine: Engine): void {
  if (noted.has(engine) || runs(engine) || !SELECTED.includes(engine)) return;
  noted.add(engine);
  console.log(`${engine} browser tests skipped: missing ${locate(engine).missing.join(", ")} (apt-get install them)`);
}
