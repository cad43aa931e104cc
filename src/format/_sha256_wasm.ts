// hash-wasm's SHA-256 alone: imported dynamically by _hash.ts where there is no node:crypto,
// and through this module so a bundler keeps only this one of hash-wasm's hashes.
export { createSHA256 } from "npm:hash-wasm@4.13.0";
