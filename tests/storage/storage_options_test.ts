// Misspelt or misplaced options, at any depth, are TypeErrors naming the option's path from the
// caller's options object and the names allowed there: never silently ignored. Nothing here
// reaches a store: the names are checked before anything is sent.
import { typeError } from "../_util.ts";
import assert from "node:assert/strict";
import {
  BackgroundWriter,
  CheckpointManager,
  FileStore,
  HttpStore,
  loadCheckpoint,
  MemoryStore,
  saveCheckpoint,
  verifyCheckpoint,
} from "../../mod.ts";
import { OpfsStore } from "../../src/storage/opfs.ts";
import { S3Store } from "../../src/storage/s3.ts";

const checkpoint = { metadata: { step: 1 }, tensors: [] };

Deno.test("an unknown store under storage is a TypeError naming storage.s4 and the stores there", async () => {
  await assert.rejects(
    () => loadCheckpoint("s3://ckpt/x.ckpt", { storage: { s4: {} } } as never),
    typeError(/^Cannot load checkpoint: unknown option "storage\.s4" \(known options at storage: s3, http\)$/),
  );
});

Deno.test("a misspelt S3 setting is a TypeError naming storage.s3.endpiont and the settings there", async () => {
  await assert.rejects(
    () => loadCheckpoint("s3://ckpt/x.ckpt", { storage: { s3: { endpiont: "http://127.0.0.1:7480" } } } as never),
    typeError(
      /^Cannot load checkpoint: unknown option "storage\.s3\.endpiont" \(known options at storage\.s3: endpoint, region, credentials, /,
    ),
  );
  await assert.rejects(
    () => saveCheckpoint("s3://ckpt/x.ckpt", checkpoint, { storage: { s3: { regoin: "eu" } } } as never),
    typeError(/^Cannot save checkpoint: unknown option "storage\.s3\.regoin"/),
  );
  await assert.rejects(
    () => verifyCheckpoint("s3://ckpt/x.ckpt", { storage: { http: { header: {} } } } as never),
    typeError(
      /^Cannot verify checkpoint: unknown option "storage\.http\.header" \(known options at storage\.http: fetch, headers\)$/,
    ),
  );
});

Deno.test("a credential beside the endpoint says it belongs under credentials", async () => {
  await assert.rejects(
    () =>
      loadCheckpoint(
        "s3://ckpt/x.ckpt",
        { storage: { s3: { endpoint: "http://127.0.0.1:1", accessKeyId: "a" } } } as never,
      ),
    typeError(/unknown option "storage\.s3\.accessKeyId": it belongs under storage\.s3\.credentials/),
  );
  await assert.rejects(
    () => loadCheckpoint("s3://ckpt/x.ckpt", { storage: { endpoint: "http://127.0.0.1:1" } } as never),
    typeError(/unknown option "storage\.endpoint": S3 settings go under storage\.s3/),
  );
  await assert.rejects(
    () =>
      loadCheckpoint("s3://ckpt/x.ckpt", {
        storage: { s3: { credentials: { accessKeyId: "a", secretAccesKey: "b" } } },
      } as never),
    typeError(
      /unknown option "storage\.s3\.credentials\.secretAccesKey" \(known options at storage\.s3\.credentials: accessKeyId, secretAccessKey, sessionToken\)/,
    ),
  );
  await assert.rejects(
    () => loadCheckpoint("s3://ckpt/x.ckpt", { storage: { s3: { bucket: "other" } } } as never),
    typeError(/"storage\.s3\.bucket": the bucket comes from the s3:\/\/ address/),
  );
});

Deno.test("typos reach the manager's options at every depth, storage included", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      () => CheckpointManager.open(dir, { maxToKep: 3 } as never),
      typeError(/^Cannot open checkpoint manager: unknown option "maxToKep" \(known options: maxToKeep, /),
    );
    await assert.rejects(
      () => CheckpointManager.open(dir, { best: { metirc: "loss", mode: "min" } } as never),
      typeError(/unknown option "best\.metirc" \(known options at best: metric, mode, keep\)/),
    );
    await assert.rejects(
      () => CheckpointManager.open(dir, { limits: { maxTensorByte: 1 } } as never),
      typeError(/unknown option "limits\.maxTensorByte"/),
    );
    await assert.rejects(
      () => CheckpointManager.open(dir, { maxTensorBytes: 1 } as never),
      typeError(/"maxTensorBytes": caps go under limits/),
    );
    await assert.rejects(
      () => CheckpointManager.open("s3://ckpt/run", { storage: { s3: { endpiont: "x" } } } as never),
      typeError(/unknown option "storage\.s3\.endpiont"/),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("stores and the background writer check their options by name", async () => {
  assert.throws(
    () => new S3Store({ bucket: "ckpt", endpiont: "x" } as never),
    typeError(/^Invalid S3StoreOptions: unknown option "endpiont"/),
  );
  assert.throws(
    () => new S3Store({ bucket: "ckpt", accessKeyId: "a" } as never),
    typeError(/"accessKeyId": it belongs under credentials/),
  );
  assert.throws(
    () => new FileStore("/tmp", { directWrite: false } as never),
    typeError(/unknown option "directWrite" \(known options: directWrites\)/),
  );
  assert.throws(() => new MemoryStore({ nmae: "x" } as never), typeError(/unknown option "nmae"/));
  // Refused before the runtime is asked for OPFS (Deno has none: the check comes first).
  await assert.rejects(
    () => OpfsStore.open("runs", { roots: {} } as never),
    typeError(/^Cannot open an OPFS store: unknown option "roots" \(known options: root\)$/),
  );
  assert.throws(
    () => new HttpStore("http://127.0.0.1:1/", { header: {} } as never),
    typeError(/unknown option "header"/),
  );
  assert.throws(
    () => new BackgroundWriter({ whenbusy: "wait" } as never),
    typeError(/unknown option "whenbusy" \(known options: whenBusy, idleTimeout, onReturn, priority\)/),
  );
  await using writer = new BackgroundWriter();
  assert.throws(
    () => writer.save("/tmp/x.ckpt", checkpoint, { compresion: "gzip" } as never),
    typeError(/^Cannot save checkpoint in the background: unknown option "compresion"/),
  );
  assert.throws(
    () => writer.save("/tmp/x.ckpt", checkpoint, { storage: {} }),
    typeError(/"storage": a background save writes to a local path or an opfs: address/),
  );
});
