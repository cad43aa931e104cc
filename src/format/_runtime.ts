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

/** Whether `e` is Deno's error class `name` (`Deno.errors[name]`); false wherever there is no Deno. */
export function isDenoError(e: unknown, name: string): boolean {
  const errors = (globalThis as { Deno?: { errors?: Record<string, unknown> } }).Deno?.errors;
  const cls = errors?.[name];
  return typeof cls === "function" && e instanceof (cls as new () => Error);
}
