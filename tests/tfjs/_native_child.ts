// Child of native_test.ts: loads @tensorflow/tfjs-node or -gpu (argument), trains the shared
// test model 6 Adam steps and prints the backend, TensorFlow version and the SHA-256 of the
// snapshot's encoding.
import { loadTfjsNode } from "../../src/tfjs/_tfjs_node.ts";
import { snapshot } from "../../src/tfjs/mod.ts";
import { saveCheckpoint } from "../../mod.ts";
import { buildModel, compile, OPTIMIZERS, train } from "./_training.ts";

const pkg = Deno.args[0] === "tfjs-node-gpu" ? "tfjs-node-gpu" : "tfjs-node";
const tf = await loadTfjsNode(pkg);
const model = buildModel();
const optimizer = OPTIMIZERS.adam!();
compile(model, optimizer);
await train(model, 0, 6);
const { sha256 } = await saveCheckpoint(new WritableStream(), await snapshot({ model, optimizer, step: 6 }), {
  sha256sum: true,
});
const tensorflow = (tf.backend() as unknown as { binding: { TF_Version: string } }).binding.TF_Version;
console.log(JSON.stringify({ pkg, backend: tf.getBackend(), tensorflow, sha256 }));
