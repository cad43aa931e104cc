// Where the BackgroundWriter's worker module is. From the sources it is _worker.ts beside this
// file; the web build (web/build.ts) maps this module to web/_worker_url.ts, which names the
// worker it builds beside its chunks (a bundler would leave "./_worker.ts" pointing at nothing).

/** The worker module a BackgroundWriter starts. */
export const WORKER_MODULE: URL = new URL("./_worker.ts", import.meta.url);
