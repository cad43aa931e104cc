// S3 memory test child: saves MIB MiB of float32 tensors, pulled one at a time, to S3 through an
// S3Store made from CONFIG (JSON), and prints {"before":..,"peak":..} in bytes: the resident set
// before the save and the process's high-water mark (VmHWM) after it. Every tensor views one
// shared buffer, so the input makes no garbage: what grows is the save's own memory.
import { saveCheckpoint } from "../../src/io/save.ts";
import { S3Store, type S3StoreOptions } from "../../src/storage/s3.ts";
import type { TensorInput } from "../../src/format/types.ts";

const [config, mib] = Deno.args as [string, string];
const store = new S3Store(JSON.parse(config) as S3StoreOptions);
const shared = new Float32Array(2 ** 20).fill(0.5); // 4 MiB
async function* tensors(): AsyncGenerator<TensorInput> {
  for (let i = 0; i < Number(mib) / 4; i++) {
    yield { name: `t${i}`, dtype: "float32", shape: [shared.length], data: shared };
  }
}
const kB = (field: string) =>
  Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(Deno.readTextFileSync("/proc/self/status"))![1]) * 1024;
const before = kB("VmRSS");
await saveCheckpoint({ store, key: "big.ckpt" }, { metadata: { step: 1 }, tensors: tensors() });
console.log(JSON.stringify({ before, peak: kB("VmHWM") }));
