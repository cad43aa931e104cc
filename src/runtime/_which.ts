// Which runtime this is, decided once when the module loads: the runtime modules beside this one
// pick their implementation from it, and nothing above src/runtime asks.

/** The runtimes ckpt knows: Deno, Node, and everything else (browsers, workers in them). */
export type Runtime = "deno" | "node" | "browser";

function which(): Runtime {
  const g = globalThis as { Deno?: { version?: { deno?: unknown } }; process?: { versions?: { node?: unknown } } };
  if (typeof g.Deno?.version?.deno === "string") return "deno";
  if (typeof g.process?.versions?.node === "string") return "node";
  return "browser";
}

/** This runtime. */
export const RUNTIME: Runtime = which();
