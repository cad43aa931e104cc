// The adapter on each backend it claims: cpu, wasm, and webgpu (Deno's built-in WebGPU; on CI
// Mesa's llvmpipe software Vulkan driver from Debian's mesa-vulkan-drivers).
import * as tf from "@tensorflow/tfjs";
import "@tensorflow/tfjs-backend-wasm";
import "@tensorflow/tfjs-backend-webgpu";
import assert from "node:assert/strict";
import { backendCases, NO_WEBGPU } from "./_backend_cases.ts";

tf.env().set("PROD", true);

const adapter = await navigator.gpu?.requestAdapter().catch(() => null);
if (adapter) console.log(`webgpu adapter: ${adapter.info.description || adapter.info.vendor || "unnamed"}`);

for (const backend of ["cpu", "wasm", "webgpu"]) {
  backendCases(
    backend,
    async () => assert.ok(await tf.setBackend(backend), `backend ${backend} initialised`),
    backend === "webgpu" && !adapter ? NO_WEBGPU : undefined,
  );
}
