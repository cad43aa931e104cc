// What the TF.js browser tests' pages import: TF.js (with the WebAssembly and WebGPU backends),
// the library and its TF.js adapter, as one module.
export * as tf from "@tensorflow/tfjs";
export { setWasmPaths } from "@tensorflow/tfjs-backend-wasm";
import "@tensorflow/tfjs-backend-webgpu";
export * from "./core_entry.ts";
export { CheckpointWriter, restore, snapshot } from "../../../src/tfjs/mod.ts";
