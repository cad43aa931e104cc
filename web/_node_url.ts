// What the web build gives for node:url: only file: URLs go through it, and only Deno has files.
export function fileURLToPath(url: string | URL): string {
  throw new TypeError(`Cannot read ${String(url)} in the web build: file: URLs need Deno`);
}
export function pathToFileURL(path: string): URL {
  throw new TypeError(`Cannot use the file path ${JSON.stringify(path)} in the web build: file paths need Deno`);
}
