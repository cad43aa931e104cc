// The adapter on the native TensorFlow backend (tfjs-node), and checkpoints crossing between it
// and cpu, wasm and webgpu: the suites in _native_adapter.ts and _native_cross_backend.ts, run
// in a child Deno with --allow-ffi (see _native.ts), each of their tests reported as a step.
import { runNativeSuites, SKIP_NATIVE } from "./_native.ts";

Deno.test({
  name: "tensorflow backend (tfjs-node under Deno): the adapter, and checkpoints across backends",
  ignore: SKIP_NATIVE,
  async fn(t) {
    await runNativeSuites(t, ["./_native_adapter.ts", "./_native_cross_backend.ts"]);
  },
});
