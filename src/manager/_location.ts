// Where a manager keeps its checkpoints: an object store, and when the manager was opened on a
// local directory, that directory too (for the lock, for quarantine renames, and for the fast
// paths that write and read checkpoint files by path). Every other access goes through the
// store, so the manager's logic is the same on a file system, in memory and on S3.

import { join } from "node:path";
import { type ObjectInfo, ObjectNotFoundError, type ObjectStore } from "../storage/types.ts";
import { iterate } from "../format/_streams.ts";

/** A checkpoint directory: a store rooted at it, and the local path when it is one. */
export class Location {
  /** The store; keys are relative to the checkpoint directory. */
  readonly store: ObjectStore;
  /** The directory, when the manager was opened on a local path. */
  readonly dir: string | undefined;

  constructor(store: ObjectStore, dir?: string) {
    this.store = store;
    this.dir = dir;
  }

  /** The directory as messages name it: its path, or the store's URL. */
  get where(): string {
    return this.dir ?? this.store.url;
  }

  /** The path (local) or URL of an object, for entries and messages. */
  name(key: string): string {
    return this.dir !== undefined ? join(this.dir, ...key.split("/")) : this.store.url + key;
  }

  /** Size of an object, or `undefined` when it is not there. */
  async size(key: string): Promise<number | undefined> {
    return (await this.store.head(key))?.size;
  }

  /**
   * A whole object and its description, or `undefined` when there is none. An object over
   * `maxBytes` is a `RangeError` and is not read.
   */
  async read(
    key: string,
    maxBytes: number,
    what: string,
  ): Promise<{ bytes: Uint8Array; info: ObjectInfo } | undefined> {
    let got;
    try {
      got = await this.store.get(key);
    } catch (e) {
      if (e instanceof ObjectNotFoundError) return undefined;
      throw e;
    }
    if (got.length > maxBytes) {
      await got.body.cancel();
      throw new RangeError(`Cannot read ${what} ${this.name(key)}: ${got.length} bytes is over the ${maxBytes} limit`);
    }
    const bytes = new Uint8Array(got.length);
    let at = 0;
    for await (const chunk of iterate(got.body)) {
      if (at + chunk.byteLength > bytes.byteLength) {
        throw new SyntaxError(`Cannot read ${what} ${this.name(key)}: it grew while being read`);
      }
      bytes.set(chunk, at);
      at += chunk.byteLength;
    }
    if (at !== bytes.byteLength) {
      throw new SyntaxError(`Cannot read ${what} ${this.name(key)}: it ended after ${at} of ${bytes.byteLength} bytes`);
    }
    return { bytes, info: got.info };
  }

  /** Writes an object atomically through a streaming writer (which honours `sync`). */
  async write(key: string, bytes: Uint8Array, sync: boolean): Promise<ObjectInfo> {
    const writer = await this.store.writer(key, { sync, sizeHint: bytes.byteLength });
    try {
      await writer.write(bytes);
    } catch (e) {
      await writer.abort(e).catch(() => {});
      throw e;
    }
    return await writer.close();
  }

  /** The SHA-256 of a whole object, streamed; `hash` is a fresh incremental hash. */
  async digest(key: string, hash: { update(b: Uint8Array): unknown; digest(enc: "hex"): string }): Promise<string> {
    const { body } = await this.store.get(key);
    for await (const chunk of iterate(body)) hash.update(chunk);
    return hash.digest("hex");
  }

  /** The first `n` bytes of an object (fewer when it is shorter). */
  async head(key: string, n: number): Promise<Uint8Array> {
    const { body, length } = await this.store.get(key, { range: { offset: 0, length: n } });
    return new Uint8Array(await new Response(body).arrayBuffer()).subarray(0, length);
  }
}
