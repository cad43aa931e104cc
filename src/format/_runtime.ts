// File paths work where Deno's file API is; elsewhere (a browser, Node) a path is a clear
// TypeError naming it, never a ReferenceError about `Deno`.

/** Throws a TypeError unless file paths can be opened here. */
export function requireFiles(path: string, verb: string): void {
  if (typeof (globalThis as { Deno?: { open?: unknown } }).Deno?.open === "function") return;
  throw new TypeError(
    `Cannot ${verb} ${
      JSON.stringify(path)
    }: file paths need Deno; here use a Blob, a Response, a stream, bytes or an ObjectStore`,
  );
}
