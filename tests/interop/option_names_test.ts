// The interop functions refuse a misspelt option, naming it, before they read or write anything.
import assert from "node:assert/strict";
import {
  ckptHandler,
  readSafetensorsHeader,
  readSha256Sidecar,
  readTfjsArtifacts,
  writeSha256Sidecar,
  writeTfjsArtifacts,
} from "../../src/interop/mod.ts";
import { MemoryStore } from "../../mod.ts";

const refused = (pattern: RegExp) => (e: unknown) => {
  assert.ok(e instanceof TypeError, String(e));
  assert.match(e.message, pattern);
  return true;
};
const ckpt = { metadata: { step: 1 }, tensors: [] };

Deno.test("interop functions refuse misspelt options by name, storage at every depth", async () => {
  const store = new MemoryStore();
  await assert.rejects(
    () => writeTfjsArtifacts(store, ckpt, { shardByte: 1 } as never),
    refused(/^Cannot write TF\.js artifacts: unknown option "shardByte" \(known options: .*shardBytes/),
  );
  await assert.rejects(
    () => readTfjsArtifacts({ store, key: "model.json" }, { allowOutsideShard: true } as never),
    refused(/^Cannot read TF\.js artifacts: unknown option "allowOutsideShard"/),
  );
  await assert.rejects(
    () => readTfjsArtifacts("s3://ckpt/web/model.json", { storage: { s3: { endpiont: "x" } } } as never),
    refused(/unknown option "storage\.s3\.endpiont"/),
  );
  assert.throws(
    () => ckptHandler({ store, key: "m.ckpt" }, { sidcar: true } as never),
    refused(/unknown option "sidcar"/),
  );
  await assert.rejects(
    () => readSafetensorsHeader({ store, key: "m.safetensors" }, { maxHeaderByte: 1 } as never),
    refused(/^Cannot read safetensors header: unknown option "maxHeaderByte"/),
  );
  await assert.rejects(
    () => writeSha256Sidecar({ store, key: "m.ckpt" }, "0".repeat(64), { synk: false } as never),
    refused(/unknown option "synk" \(known options: storage, sync\)/),
  );
  await assert.rejects(() => readSha256Sidecar({ store, key: "m.ckpt" }, { storag: {} } as never), refused(/"storag"/));
});
