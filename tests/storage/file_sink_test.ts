// StagedFileSink against stand-in file handles whose writes and flushes the test settles itself:
// double buffering (one buffer fills while the other is written, one write in flight), and the
// flush behind the writes (when it starts, one at a time, through the second handle, close waits
// for it, a failed flush fails the save).
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

/** A stand-in file whose writes each wait until the test settles them. */
function slowFile() {
  const writes: { bytes: number; done: () => void }[] = [];
  const file = {
    write(bytes: Uint8Array): Promise<number> {
      return new Promise<number>((resolve) =>
        writes.push({ bytes: bytes.byteLength, done: () => resolve(bytes.byteLength) })
      );
    },
  };
  return { file: file as unknown as Deno.FsFile, writes };
}

Deno.test("StagedFileSink fills one buffer while the other is being written, and never has two writes in flight", async () => {
  const { file, writes } = slowFile();
  const sink = new StagedFileSink(file, { staging: 4 });
  await sink.write(new Uint8Array(4)); // the first buffer is handed off; its write is in flight
  assert.equal(writes.length, 1);
  const filling = await Promise.race([sink.write(new Uint8Array(3)).then(() => "filled"), tick().then(() => "waited")]);
  assert.equal(filling, "filled", "the other buffer takes bytes while the first one is written");
  let second = false;
  const more = sink.write(new Uint8Array(1)).then(() => second = true); // fills the second buffer: its write must wait
  await tick();
  assert.equal(writes.length, 1, "one write in flight at a time");
  assert.equal(second, false);
  writes[0]!.done();
  await tick();
  assert.equal(writes.length, 2);
  await more;
  const closing = sink.close();
  await tick();
  writes[1]!.done();
  await closing;
  assert.deepEqual(writes.map((w) => w.bytes), [4, 4]);
});

Deno.test("StagedFileSink writes a buffer once it holds writeMin bytes while no write is in flight, and fills it further while one is", async () => {
  const { file, writes } = slowFile();
  const sink = new StagedFileSink(file, { staging: 8, writeMin: 3 });
  await sink.write(new Uint8Array(2));
  assert.equal(writes.length, 0, "under writeMin: staged");
  await sink.write(new Uint8Array(2)); // 4 staged, nothing in flight: written now
  assert.deepEqual(writes.map((w) => w.bytes), [4]);
  await sink.write(new Uint8Array(5)); // past writeMin, but a write is in flight: the buffer fills
  assert.equal(writes.length, 1);
  writes[0]!.done();
  await tick();
  await sink.write(new Uint8Array(1)); // nothing in flight now: 6 staged go out
  assert.deepEqual(writes.map((w) => w.bytes), [4, 6]);
  const closing = sink.close();
  writes[1]!.done();
  await closing;
  assert.equal(sink.bytes, 10);
});

/**
 * A file as a byte array behind two stand-ins: its handle (`write` at its position, `seek`,
 * flushes through a flusher) and a direct descriptor (`write` at an offset). Every call is
 * recorded; `refuse` makes the direct descriptor refuse its n-th write (1-based) with -1.
 */
function modelFile(options: { refuse?: number; accepts?: boolean } = {}) {
  let bytes = new Uint8Array(0);
  let position = 0;
  const calls: string[] = [];
  const put = (chunk: Uint8Array, at: number) => {
    if (at + chunk.byteLength > bytes.byteLength) {
      const grown = new Uint8Array(at + chunk.byteLength);
      grown.set(bytes);
      bytes = grown;
    }
    bytes.set(chunk, at);
  };
  const file = {
    write(chunk: Uint8Array): Promise<number> {
      calls.push(`write ${position}+${chunk.byteLength}`);
      put(chunk, position);
      position += chunk.byteLength;
      return Promise.resolve(chunk.byteLength);
    },
    seek(offset: number): Promise<number> {
      position = offset;
      return Promise.resolve(offset);
    },
  };
  const flusher = {
    syncData(): Promise<void> {
      calls.push("sync");
      return Promise.resolve();
    },
    close(): void {},
  };
  let directWrites = 0;
  const direct = {
    accepts: () => options.accepts ?? true,
    write(chunk: Uint8Array, offset: number): Promise<number> {
      if (++directWrites === options.refuse) {
        calls.push(`direct refused ${offset}+${chunk.byteLength}`);
        return Promise.resolve(-1);
      }
      calls.push(`direct ${offset}+${chunk.byteLength}`);
      put(chunk, offset);
      return Promise.resolve(chunk.byteLength);
    },
    close(): void {
      calls.push("direct closed");
    },
  };
  return {
    file: file as unknown as Deno.FsFile,
    flusher: flusher as unknown as Deno.FsFile,
    direct,
    calls,
    contents: () => bytes,
  };
}

/**
 * Writes 40000 bytes that differ from block to block, in chunks of 7000, through a sink with two
 * 16 KiB staging buffers over a {@linkcode modelFile}; checks the file holds exactly them.
 */
async function runDirect(
  file: { refuse?: number; accepts?: boolean } = {},
  writeMin = 16384,
): Promise<{ calls: string[]; bytes: number }> {
  const m = modelFile(file);
  const sink = new StagedFileSink(m.file, { staging: 16384, writeMin, flushBehind: m.flusher, direct: m.direct });
  const data = new Uint8Array(40000).map((_, i) => (i * 31 + (i >> 12)) & 255);
  for (let off = 0; off < data.byteLength; off += 7000) await sink.write(data.subarray(off, off + 7000));
  await sink.close();
  assert.deepEqual(m.contents(), data);
  return { calls: m.calls, bytes: sink.bytes };
}

Deno.test("StagedFileSink with direct writes whole 4 KiB blocks through it at their offsets, carries the rest into the next buffer, and writes only the file's last partial block through the handle, unflushed", async () => {
  const { calls, bytes } = await runDirect();
  // 21000 bytes fill the first buffer (four blocks), 35000 the second; the last 7232 bytes are a
  // whole block and 3136 bytes.
  assert.deepEqual(calls, [
    "direct 0+16384",
    "direct 16384+16384",
    "direct 32768+4096",
    "write 36864+3136",
    "direct closed",
  ]);
  assert.equal(bytes, 40000);
});

Deno.test("StagedFileSink with direct carries a buffer's unaligned end over when it writes early (writeMin)", async () => {
  const { calls } = await runDirect({}, 5000);
  for (const call of calls.filter((c) => /^direct \d/.test(c))) {
    const [offset, length] = call.slice("direct ".length).split("+").map(Number);
    assert.equal(offset! % 4096, 0, call);
    assert.equal(length! % 4096, 0, call);
  }
  assert.equal(calls.at(-2), "write 36864+3136");
});

Deno.test("StagedFileSink: a direct write refused sends that buffer and the rest of the file through the handle, at the right offsets, flushed behind again", async () => {
  const { calls } = await runDirect({ refuse: 2 });
  assert.deepEqual(calls, [
    "direct 0+16384",
    "direct refused 16384+16384",
    "direct closed",
    "write 16384+16384",
    "sync",
    "write 32768+7232",
    "sync",
  ]);
});

Deno.test("StagedFileSink: staging buffers the direct descriptor does not accept (unaligned) leave it unused and closed", async () => {
  const { calls } = await runDirect({ accepts: false });
  // Every write through the handle, the last too, is flushed behind as without direct.
  assert.deepEqual(calls, [
    "direct closed",
    "write 0+16384",
    "sync",
    "write 16384+16384",
    "sync",
    "write 32768+7232",
    "sync",
  ]);
});
