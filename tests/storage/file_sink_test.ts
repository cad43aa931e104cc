// StagedFileSink's flush behind the writes, against stand-in file handles whose flushes the test
// settles itself: when a flush starts, that only one runs at a time, that it goes through the
// second handle, that close waits for it, and that a failed flush fails the save.
// tests/storage/file_durability_test.ts watches the real system calls of a FileStore write.
import assert from "node:assert/strict";
import { StagedFileSink } from "../../src/storage/_file_sink.ts";

/** Stand-ins for a file's writing handle and its flushing handle: calls recorded in one list. */
function fakeFile() {
  const calls: string[] = [];
  const syncs: { resolve: () => void; reject: (e: unknown) => void }[] = [];
  const file = {
    write(bytes: Uint8Array): Promise<number> {
      calls.push(`write ${bytes.byteLength}`);
      return Promise.resolve(bytes.byteLength);
    },
    syncData(): Promise<void> {
      calls.push("sync on the writing handle");
      return Promise.resolve();
    },
  };
  const flusher = {
    syncData(): Promise<void> {
      calls.push("sync");
      return new Promise<void>((resolve, reject) => syncs.push({ resolve, reject }));
    },
    close(): void {
      calls.push("close flusher");
    },
  };
  return { file: file as unknown as Deno.FsFile, flusher: flusher as unknown as Deno.FsFile, calls, syncs };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

Deno.test("StagedFileSink with flushBehind flushes through the second handle once a buffer is written, one flush at a time, and close waits for it", async () => {
  const { file, flusher, calls, syncs } = fakeFile();
  const sink = new StagedFileSink(file, { staging: 4, flushBehind: flusher });
  await sink.write(new Uint8Array(10)); // two buffers handed off, 2 bytes staged
  await tick();
  assert.deepEqual(calls, ["write 4", "sync", "write 4"], "the second buffer's write does not start another flush");
  let closed = false;
  const closing = sink.close().then(() => closed = true);
  await tick();
  assert.deepEqual(calls, ["write 4", "sync", "write 4", "write 2"]);
  assert.equal(closed, false, "close waits for the flush in flight");
  syncs[0]!.resolve();
  await closing;
  assert.deepEqual(calls.slice(4), ["close flusher"]);
  assert.equal(sink.bytes, 10);
});

Deno.test("StagedFileSink: a failed flush fails the next write and the close, and starts no other", async () => {
  const { file, flusher, calls, syncs } = fakeFile();
  const sink = new StagedFileSink(file, { staging: 4, flushBehind: flusher });
  await sink.write(new Uint8Array(4));
  await tick();
  const failure = new Error("EIO");
  syncs[0]!.reject(failure);
  await tick();
  await assert.rejects(sink.write(new Uint8Array(4)), (e) => e === failure);
  await assert.rejects(sink.close(), (e) => e === failure);
  assert.equal(calls.filter((c) => c === "sync").length, 1);
  assert.equal(calls.at(-1), "close flusher");
});

Deno.test("StagedFileSink: an abort waits for the flush in flight, then closes the flusher", async () => {
  const { file, flusher, calls, syncs } = fakeFile();
  const sink = new StagedFileSink(file, { staging: 4, flushBehind: flusher });
  await sink.write(new Uint8Array(4));
  await tick();
  const aborting = sink.abort();
  await tick();
  assert.ok(!calls.includes("close flusher"));
  syncs[0]!.resolve();
  await aborting;
  assert.equal(calls.at(-1), "close flusher");
});

Deno.test("StagedFileSink without flushBehind never flushes: the caller's one fdatasync is all", async () => {
  const { file, calls } = fakeFile();
  const sink = new StagedFileSink(file, { staging: 4 });
  await sink.write(new Uint8Array(10));
  await sink.close();
  assert.deepEqual(calls, ["write 4", "write 4", "write 2"]);
});
