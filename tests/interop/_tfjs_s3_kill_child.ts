// Child of tfjs_artifacts_store_test.ts: exports TF.js artifacts to S3 from tensors that come
// one at a time, and stops dead (printing `stopped`) once `shards` shards are uploaded, so the
// parent can SIGKILL it in the middle of the export.
import { writeTfjsArtifacts } from "../../src/interop/tfjs_artifacts.ts";
import { S3Store, type S3StoreOptions } from "../../src/storage/s3.ts";
import type { TensorInput } from "../../src/format/types.ts";

const [config, shards] = Deno.args as [string, string];
const options = JSON.parse(config) as S3StoreOptions;
const store = new S3Store(options);
const MiB = 2 ** 20;

async function* tensors(): AsyncGenerator<TensorInput> {
  for (let i = 0;; i++) {
    if (i === Number(shards) + 1) {
      // Tensor N started shard N + 1, which closed shard N: wait until shards 1..N are listed
      // (shard N + 1 is still open), then stop.
      for (;;) {
        const keys = await Array.fromAsync(store.list("weights-"), (o) => o.key);
        if (keys.length >= Number(shards)) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      Deno.stdout.writeSync(new TextEncoder().encode("stopped\n"));
      setInterval(() => {}, 60_000);
      await new Promise(() => {});
    }
    // One 4 MiB shard per tensor (the default shard size).
    yield { name: `t${i}`, dtype: "float32", shape: [MiB], data: new Float32Array(MiB).fill(i + 2) };
  }
}

await writeTfjsArtifacts(store, { metadata: { step: 2 }, tensors: tensors() });
