// What the web build gives for node:path: the library uses it only for file paths, which only
// Deno has; here every use is a TypeError that says so.
function noPaths(): never {
  throw new TypeError(
    "Cannot use a file path in the web build: pass a Blob, a Response, a stream, bytes or an ObjectStore",
  );
}
export const basename: (...args: unknown[]) => string = noPaths;
export const dirname: (...args: unknown[]) => string = noPaths;
export const isAbsolute: (...args: unknown[]) => boolean = noPaths;
export const join: (...args: unknown[]) => string = noPaths;
export const relative: (...args: unknown[]) => string = noPaths;
export const resolve: (...args: unknown[]) => string = noPaths;
export const sep = "/";
