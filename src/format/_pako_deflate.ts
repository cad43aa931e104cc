// pako's deflate alone (zlib's deflate ported to JavaScript): imported dynamically by _deflate.ts
// where there is no node:zlib (a browser), and through this module so a bundler keeps only
// pako's deflate, not its inflate (the page's DecompressionStream inflates).
export { deflateRaw } from "npm:pako@3.0.3/browser/deflate";
