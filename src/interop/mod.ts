/**
 * Interop: safetensors as a ckpt codec, `sha256sum` sidecars, and TF.js model artifacts.
 *
 * @module
 */
export * from "./safetensors.ts";
export * from "./safetensors_metadata.ts";
export * from "./sidecar.ts";
