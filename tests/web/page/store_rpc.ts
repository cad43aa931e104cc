// Page side of the OPFS contract test: the Deno test drives a real OpfsStore in this page
// through these calls, bytes over HTTP, errors as { name, message, url }.
import { type DirectoryEntry, OpfsStore } from "../../../src/storage/opfs.ts";
import type { ObjectInfo, ObjectStore, ObjectWriter, PutMode } from "../../../src/storage/types.ts";

const stores = new Map<number, { store: ObjectStore; path: string }>();
const writers = new Map<number, ObjectWriter>();
const controllers = new Map<number, AbortController>();
let next = 1;

// Bytes cross over HTTP to the test's server (the protocol is slow with large strings).
async function send(bytes: Uint8Array, name: string): Promise<void> {
  const r = await fetch(`/upload/${name}`, { method: "PUT", body: bytes as Uint8Array<ArrayBuffer> });
  if (!r.ok) throw new Error(`upload of ${name} failed: ${r.status}`);
}

async function receive(name: string): Promise<Uint8Array> {
  const r = await fetch(`/blob/${name}`);
  if (!r.ok) throw new Error(`download of ${name} failed: ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

/** Info with the date as milliseconds (it crosses the protocol as JSON). */
function plain(i: ObjectInfo) {
  return { key: i.key, size: i.size, version: i.version, lastModified: i.lastModified?.getTime() };
}

function signalOf(id: number | undefined, aborted: string | undefined): AbortSignal | undefined {
  if (id === undefined) return undefined;
  const ac = new AbortController();
  controllers.set(id, ac);
  if (aborted !== undefined) ac.abort(new Error(aborted));
  return ac.signal;
}

type Args = Record<string, unknown>;

const calls: Record<string, (a: Args) => Promise<unknown>> = {
  async open(a) {
    const id = next++;
    const path = a.path as string;
    stores.set(id, { store: await OpfsStore.open(path), path });
    return id;
  },
  async destroy(a) {
    const s = stores.get(a.store as number)!;
    stores.delete(a.store as number);
    const root = await (navigator as unknown as { storage: { getDirectory(): Promise<DirectoryEntry> } }).storage
      .getDirectory();
    const parts = s.path.split("/");
    let dir = root;
    for (const p of parts.slice(0, -1)) dir = await dir.getDirectoryHandle(p);
    await dir.removeEntry(parts.at(-1)!, { recursive: true });
  },
  async get(a) {
    const { store } = stores.get(a.store as number)!;
    const r = await store.get(a.key as string, a.range ? { range: a.range as never } : {});
    const bytes = new Uint8Array(await new Response(r.body).arrayBuffer());
    await send(bytes, a.blob as string);
    return { info: plain(r.info), offset: r.offset, length: r.length };
  },
  async head(a) {
    const i = await stores.get(a.store as number)!.store.head(a.key as string);
    return i ? plain(i) : null;
  },
  async put(a) {
    const { store } = stores.get(a.store as number)!;
    const signal = signalOf(a.signal as number | undefined, a.aborted as string | undefined);
    return plain(
      await store.put(a.key as string, await receive(a.blob as string), {
        ...(a.mode !== undefined ? { mode: a.mode as PutMode } : {}),
        ...(signal ? { signal } : {}),
      }),
    );
  },
  async writer(a) {
    const { store } = stores.get(a.store as number)!;
    const signal = signalOf(a.signal as number | undefined, a.aborted as string | undefined);
    const w = await store.writer(a.key as string, signal ? { signal } : {});
    const id = next++;
    writers.set(id, w);
    return id;
  },
  async write(a) {
    await writers.get(a.writer as number)!.write(await receive(a.blob as string));
  },
  async close(a) {
    return plain(await writers.get(a.writer as number)!.close());
  },
  async abort(a) {
    await writers.get(a.writer as number)!.abort(a.reason === undefined ? undefined : new Error(a.reason as string));
  },
  abortSignal(a) {
    controllers.get(a.signal as number)?.abort(new Error(a.reason as string));
    return Promise.resolve();
  },
  async delete(a) {
    await stores.get(a.store as number)!.store.delete(a.key as string);
  },
  async list(a) {
    const out = [];
    for await (const i of stores.get(a.store as number)!.store.list(a.prefix as string | undefined)) out.push(plain(i));
    return out;
  },
  async sweep(a) {
    return await stores.get(a.store as number)!.store.sweep!(a.prefix as string | undefined);
  },
};

/** Runs one call; never rejects (an error comes back as data, to be rebuilt on the Deno side). */
export async function rpc(method: string, args: Args): Promise<{ ok: unknown } | { error: Record<string, unknown> }> {
  try {
    return { ok: await calls[method]!(args) };
  } catch (e) {
    const err = e as Error & { url?: string };
    return {
      error: { name: err?.name, ctor: err?.constructor?.name, message: err?.message ?? String(e), url: err?.url },
    };
  }
}
