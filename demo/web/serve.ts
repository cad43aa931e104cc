/**
 * `deno task web`: builds the browser demo (demo/web/app.ts with TF.js, ckpt's tfjs adapter, the
 * manager and the OPFS store) and serves it on 127.0.0.1, printing the URL.
 *
 * ```sh
 * deno task web              # http://127.0.0.1:8700/
 * deno task web --port 0     # any free port
 * ```
 *
 * @module
 */
import { createRequire } from "node:module";
import { basename, join } from "node:path";
import { buildWeb, ROOT } from "../../web/build.ts";
import { type ServeOptions, serveStatic, type StaticServer } from "../../web/serve.ts";

const WASM_FILES = ["tfjs-backend-wasm.wasm", "tfjs-backend-wasm-simd.wasm", "tfjs-backend-wasm-threaded-simd.wasm"];

/** Builds the demo into `outDir`: app.js (and its chunks), index.html and TF.js's wasm binaries. */
export async function buildDemo(outDir: string): Promise<void> {
  await buildWeb(outDir, { entries: { app: "demo/web/app.ts" }, external: [] });
  await Deno.copyFile(join(ROOT, "demo/web/index.html"), join(outDir, "index.html"));
  const require = createRequire(import.meta.url);
  for (const f of WASM_FILES) {
    const src = require.resolve(`@tensorflow/tfjs-backend-wasm/dist/${f}`);
    await Deno.copyFile(src, join(outDir, basename(src)));
  }
}

/**
 * Builds the demo into a temporary directory and serves it (on `port`, with the server's other
 * `options`); close() stops it and removes the build.
 */
export async function startDemo(port = 0, options: Omit<ServeOptions, "port"> = {}): Promise<StaticServer> {
  const dir = await Deno.makeTempDir({ prefix: "ckpt-web-demo-" });
  await buildDemo(dir);
  const server = serveStatic({ "": dir }, { ...options, port });
  return {
    url: server.url,
    async close() {
      await server.close();
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

if (import.meta.main) {
  const i = Deno.args.indexOf("--port");
  const port = i >= 0 ? Number(Deno.args[i + 1]) : 8700;
  console.log("building the demo…");
  const server = await startDemo(port);
  console.log(`ckpt browser demo: ${server.url}  (Ctrl-C to stop)`);
  Deno.addSignalListener("SIGINT", async () => {
    await server.close();
    Deno.exit(0);
  });
}
