// The web build's stand-in for src/background/_worker_url.ts: the BackgroundWriter's worker is
// built as ckpt-worker.js, beside the chunk this module lands in.

/** The worker module a BackgroundWriter starts. */
export const WORKER_MODULE: URL = new URL("./ckpt-worker.js", import.meta.url);
