// Checkpoints across backends: written while training on the native `tensorflow` backend and
// restored on cpu, wasm and webgpu, and the other way round, carry the same tensors, byte for
// byte, Adam state included (a snapshot taken right after the restore encodes to the same
// SHA-256 as the checkpoint restored). Run by native_test.ts in a child with --allow-ffi.
import * as tf from "@tensorflow/tfjs";
import "@tensorflow/tfjs-backend-wasm";
import "@tensorflow/tfjs-backend-webgpu";
import assert from "node:assert/strict";
import { restore, snapshot } from "../../src/tfjs/mod.ts";
import { loadCheckpoint, saveCheckpoint } from "../../mod.ts";
import { buildModel, compile, OPTIMIZERS, train } from "./_training.ts";
import { useNative } from "./_native.ts";
import { NO_WEBGPU } from "./_backend_cases.ts";
import { componentTest } from "../_ci.ts";

const adapter = await navigator.gpu?.requestAdapter().catch(() => null);

async function use(backend: string) {
  if (backend === "tensorflow") return await useNative();
  assert.ok(await tf.setBackend(backend), `backend ${backend} initialised`);
}

/** Trains 12 Adam steps on `backend` and saves the state to a file; returns its path and digest. */
async function trainAndSave(backend: string): Promise<{ path: string; sha256: string }> {
  await use(backend);
  const model = buildModel();
  const optimizer = OPTIMIZERS.adam!();
  compile(model, optimizer);
  await train(model, 0, 12);
  const path = await Deno.makeTempFile({ suffix: `.${backend}.ckpt` });
  const { sha256 } = await saveCheckpoint(path, await snapshot({ model, optimizer, step: 12 }), { sha256sum: true });
  model.dispose();
  optimizer.dispose();
  return { path, sha256: sha256! };
}

/** Restores the file on `backend` into a fresh model and optimizer and snapshots them again. */
async function restoreAndDigest(path: string, backend: string): Promise<{ sha256: string; losses: number[] }> {
  await use(backend);
  const model = buildModel({ seed: 77 });
  const optimizer = OPTIMIZERS.adam!();
  compile(model, optimizer);
  const report = await restore(await loadCheckpoint(path), { model, optimizer, adamPowers: "replay" });
  assert.deepEqual([report.missing, report.unexpected, report.mismatched], [[], [], []]);
  const again = await snapshot({ model, optimizer, step: 12 });
  const { sha256 } = await saveCheckpoint(new WritableStream(), again, { sha256sum: true });
  const losses = await train(model, 12, 14);
  model.dispose();
  optimizer.dispose();
  return { sha256: sha256!, losses };
}

for (const other of ["cpu", "wasm", "webgpu"]) {
  const missing = other === "webgpu" && !adapter ? NO_WEBGPU : undefined;
  for (const [from, to] of [["tensorflow", other], [other, "tensorflow"]]) {
    componentTest({
      name:
        `a checkpoint written while training Adam on ${from} restores on ${to} bit for bit, optimizer state included`,
      async fn() {
        const saved = await trainAndSave(from!);
        try {
          const there = await restoreAndDigest(saved.path, to!);
          assert.equal(there.sha256, saved.sha256);
          const losses = there.losses;
          assert.ok(losses.every(Number.isFinite), `training goes on on ${to}: ${losses}`);
        } finally {
          await Deno.remove(saved.path);
        }
      },
    }, missing);
  }
}
