// A comparison's options are checked by name at every depth: a misspelt tolerance is a
// TypeError naming its path, never a comparison silently stricter or looser than asked for.
import assert from "node:assert/strict";
import { assertCheckpointEquals, assertCheckpointSnapshot } from "../../src/testing/mod.ts";

const ckpt = {
  metadata: { step: 1 },
  tensors: [{ name: "w", dtype: "float32" as const, shape: [1], data: new Float32Array([1]) }],
};
const refused = (pattern: RegExp) => (e: unknown) => {
  assert.ok(e instanceof TypeError, String(e));
  assert.match(e.message, pattern);
  return true;
};

Deno.test("assertCheckpointEquals refuses a misspelt option at any depth, naming its path", async () => {
  await assert.rejects(
    () => assertCheckpointEquals(ckpt, ckpt, { atoll: 1 } as never),
    refused(/^Cannot compare checkpoints: unknown option "atoll" \(known options: atol, rtol, /),
  );
  await assert.rejects(
    () => assertCheckpointEquals(ckpt, ckpt, { dtypes: { float61: { atol: 1 } } } as never),
    refused(/unknown option "dtypes\.float61" \(known options at dtypes: float32, /),
  );
  await assert.rejects(
    () => assertCheckpointEquals(ckpt, ckpt, { dtypes: { float16: { atoll: 1e-3 } } } as never),
    refused(/unknown option "dtypes\.float16\.atoll" \(known options at dtypes\.float16: atol, rtol\)/),
  );
  await assert.rejects(
    () => assertCheckpointEquals(ckpt, ckpt, { names: [{ pattern: "w", rtol: 0 }, { patern: "head/*" }] } as never),
    refused(/unknown option "names\[1\]\.patern" \(known options at names\[1\]: pattern, atol, rtol\)/),
  );
  await assert.rejects(
    () => assertCheckpointEquals(ckpt, ckpt, { metrics: { tol: 1 } } as never),
    refused(/unknown option "metrics\.tol"/),
  );
  await assert.rejects(
    () => assertCheckpointEquals(ckpt, ckpt, { decode: { maxTensorByte: 1 } } as never),
    refused(/unknown option "decode\.maxTensorByte"/),
  );
  // The names that are right still pass.
  await assertCheckpointEquals(ckpt, ckpt, {
    atol: 0,
    dtypes: { float16: { atol: 1e-3 } },
    names: [{ pattern: "w", rtol: 0 }],
    message: "m",
    maxEntries: 3,
    decode: { maxTensorBytes: 1024 },
  });
});

Deno.test("assertCheckpointSnapshot refuses a misspelt option before touching any golden file", async (t) => {
  await assert.rejects(
    () => assertCheckpointSnapshot(t, ckpt, { updte: true } as never),
    refused(/unknown option "updte" \(known options: .*name, dir, update, compression\)/),
  );
});
