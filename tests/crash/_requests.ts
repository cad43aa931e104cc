// Crash states of a save to an object store: each request is atomic, but a crash can stop the save
// between any two of them. The requests of a save are recorded through the `fetch` an S3Store is
// given (every request, bodies included, as the store sends it to the real RGW), with when each
// was sent and when its answer came. A crash state is a set of requests that took effect, closed
// under "answered before sent": a request in it brings every request answered before it was sent
// (every prefix of the sequence, and, for requests in flight together, every subset of them).
// Each state is replayed onto the objects as they were before the save, into a MemoryStore (the
// same ObjectStore contract as S3Store: tests/storage/_contract.ts runs both) for the full
// enumeration, and into a fresh prefix of the real bucket for a sample.

import { MemoryStore } from "../../src/storage/memory.ts";
import type { ObjectStore } from "../../src/storage/types.ts";
import { prng } from "../_util.ts";

/** One request the store sent, and what came of it. */
export interface S3Request {
  method: string;
  /** The object key below the bucket (decoded), "" for the bucket itself. */
  key: string;
  query: URLSearchParams;
  headers: Headers;
  body: Uint8Array;
  status: number;
  /** Order numbers: when it was sent, when its answer came (one counter for both). */
  sent: number;
  done: number;
}

/** A `fetch` that sends every request on and logs it in `log`. */
export function recordingFetch(log: S3Request[]): typeof fetch {
  let clock = 0;
  return async (input, init) => {
    const request = new Request(input, init);
    const body = new Uint8Array(await request.arrayBuffer());
    const url = new URL(request.url);
    const [, , ...rest] = url.pathname.split("/");
    const entry: S3Request = {
      method: request.method,
      key: rest.map(decodeURIComponent).join("/"),
      query: url.searchParams,
      headers: request.headers,
      body,
      status: 0,
      sent: clock++,
      done: -1,
    };
    const res = await fetch(request.url, {
      method: request.method,
      headers: request.headers,
      body: ["GET", "HEAD"].includes(request.method) ? undefined : body,
      signal: init?.signal ?? null,
    });
    entry.status = res.status;
    entry.done = clock++;
    log.push(entry);
    return res;
  };
}

/** Whether a request can change what the bucket holds (an answered, successful write). */
function mutates(r: S3Request): boolean {
  return r.status >= 200 && r.status < 300 && r.method !== "GET" && r.method !== "HEAD";
}

const text = new TextDecoder();

function xmlValues(body: Uint8Array, tag: string): string[] {
  const out: string[] = [];
  for (const m of text.decode(body).matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, "g"))) {
    out.push(m[1]!.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&amp;/g, "&"));
  }
  return out;
}

/** What a set of requests leaves: the objects (by full bucket key) after applying them in order. */
export function apply(before: Map<string, Uint8Array>, requests: readonly S3Request[]): Map<string, Uint8Array> {
  const objects = new Map(before);
  const parts = new Map<string, Map<number, Uint8Array>>();
  for (const r of [...requests].sort((a, b) => a.done - b.done)) {
    const uploadId = r.query.get("uploadId");
    if (r.method === "PUT" && uploadId !== null) {
      if (!parts.has(uploadId)) parts.set(uploadId, new Map());
      parts.get(uploadId)!.set(Number(r.query.get("partNumber")), r.body);
    } else if (r.method === "PUT") {
      if (r.headers.has("x-amz-copy-source")) throw new TypeError("Cannot replay a copy: not recorded");
      objects.set(r.key, r.body);
    } else if (r.method === "POST" && uploadId !== null) {
      const got = parts.get(uploadId)!;
      const pieces = xmlValues(r.body, "PartNumber").map((n) => got.get(Number(n))!);
      const whole = new Uint8Array(pieces.reduce((n, p) => n + p.byteLength, 0));
      let at = 0;
      for (const p of pieces) {
        whole.set(p, at);
        at += p.byteLength;
      }
      objects.set(r.key, whole);
    } else if (r.method === "POST" && r.query.has("delete")) {
      for (const key of xmlValues(r.body, "Key")) objects.delete(key);
    } else if (r.method === "DELETE" && uploadId === null) {
      objects.delete(r.key);
    }
  }
  return objects;
}

/**
 * The crash states of a recorded save: sets of its mutating requests closed under "answered
 * before sent", as lists of requests. Throws past `max` (a save with too much in flight at once).
 */
export function requestStates(log: readonly S3Request[], max = 100_000): S3Request[][] {
  const writes = log.filter(mutates).sort((a, b) => a.sent - b.sent);
  const states: S3Request[][] = [];
  const walk = (i: number, taken: S3Request[], left: Set<S3Request>) => {
    if (states.length > max) throw new RangeError(`Cannot enumerate: more than ${max} request states`);
    if (i === writes.length) {
      states.push(taken);
      return;
    }
    const r = writes[i]!;
    // It may have taken effect only if everything answered before it was sent did.
    if (writes.every((p) => p.done > r.sent || !left.has(p))) walk(i + 1, [...taken, r], left);
    walk(i + 1, taken, new Set([...left, r]));
  };
  walk(0, [], new Set());
  // In the order of a sequence's prefixes: fewest requests first.
  return states.sort((a, b) => a.length - b.length);
}

/** A MemoryStore holding `objects` (full bucket keys) below `prefix`, with the prefix taken off. */
export async function memoryStoreOf(objects: Map<string, Uint8Array>, prefix: string): Promise<MemoryStore> {
  const store = new MemoryStore();
  for (const [key, bytes] of objects) if (key.startsWith(prefix)) await store.put(key.slice(prefix.length), bytes);
  return store;
}

/** Every object of a store, by key. */
export async function objectsOf(store: ObjectStore, keyPrefix = ""): Promise<Map<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  for await (const o of store.list()) {
    const { body } = await store.get(o.key);
    out.set(keyPrefix + o.key, new Uint8Array(await new Response(body).arrayBuffer()));
  }
  return out;
}

/** `n` indexes of `count` drawn with `seed` (all when `count <= n`), the last one always among them. */
export function sample(count: number, n: number, seed: number): number[] {
  if (count <= n) return Array.from({ length: count }, (_, i) => i);
  const random = prng(seed);
  const picked = new Set<number>([count - 1]);
  while (picked.size < n) picked.add(Math.floor(random() * count));
  return [...picked].sort((a, b) => a - b);
}

/** One save to an object store to check against every request state. */
export interface StoreCrashCase {
  /** Makes the state before the save (the old checkpoint) in `store`. */
  prepare(store: ObjectStore): Promise<void>;
  /** The save whose requests are recorded. */
  save(store: ObjectStore): Promise<void>;
  /** Recovery from a crash state in `store`; throws when it is wrong (`returned`: every request took effect). */
  check(store: ObjectStore, state: { returned: boolean }): Promise<void>;
  /** How many states are also replayed into the real bucket. @default {3} */
  rgwSample?: number;
  /** Options of the recording store (a part size, say). @default {{}} */
  storeOptions?: { partSize?: number; concurrency?: number };
}

/** What the enumeration found. */
export interface StoreCrashReport {
  /** Requests of the save, and how many of them changed the bucket. */
  requests: number;
  writes: number;
  /** Most requests in flight at once. */
  inFlight: number;
  /** Request states (all checked, in memory), distinct object sets among them, states replayed into RGW. */
  states: number;
  distinct: number;
  rgw: number;
  failures: string[];
}

/** A bucket to record in (tests/_s3.ts's TestBucket). */
export interface Bucket {
  store(options?: { prefix?: string; fetch?: typeof fetch; partSize?: number; concurrency?: number }): ObjectStore;
}

/** Records `c.save` through a bucket, then checks recovery from every request state. */
export async function exploreRequestCrashes(
  bucket: Bucket,
  name: string,
  c: StoreCrashCase,
): Promise<StoreCrashReport> {
  const prefix = `crash-${name}/`;
  const log: S3Request[] = [];
  const store = bucket.store({ ...c.storeOptions, prefix, fetch: recordingFetch(log) });
  await c.prepare(store);
  const before = await objectsOf(bucket.store({ prefix }), prefix);
  log.length = 0;
  await c.save(store);
  const states = requestStates(log);
  const writes = log.filter(mutates).length;
  const failures: string[] = [];
  const seen = new Map<string, string | undefined>();
  const rgw = new Set(sample(states.length, c.rgwSample ?? 3, writes));
  const describe = (s: S3Request[]) =>
    `after ${s.length} of ${writes} writes (${s.map((r) => `${r.method} ${r.key.slice(prefix.length)}`).join(", ")})`;
  const fail = async (run: () => Promise<void>) => {
    try {
      await run();
      return undefined;
    } catch (e) {
      return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
    }
  };
  for (const [i, state] of states.entries()) {
    const objects = apply(before, state);
    const returned = state.length === writes;
    const key = `${returned}\n${[...objects].map(([k, v]) => `${k}:${v.byteLength}:${sum(v)}`).sort().join("\n")}`;
    if (!seen.has(key)) {
      seen.set(key, await fail(async () => c.check(await memoryStoreOf(objects, prefix), { returned })));
    }
    const error = seen.get(key);
    if (error !== undefined) failures.push(`${describe(state)}: ${error}`);
    if (rgw.has(i)) {
      const replayPrefix = `replay-${name}-${i}/`;
      const replay = bucket.store({ prefix: replayPrefix });
      for (const [k, v] of objects) if (k.startsWith(prefix)) await replay.put(k.slice(prefix.length), v);
      const e = await fail(() => c.check(replay, { returned }));
      if (e !== undefined) failures.push(`RGW replay ${describe(state)}: ${e}`);
    }
  }
  let inFlight = 0;
  for (const r of log) inFlight = Math.max(inFlight, log.filter((p) => p.sent <= r.sent && p.done > r.sent).length);
  return {
    requests: log.length,
    writes,
    inFlight,
    states: states.length,
    distinct: seen.size,
    rgw: rgw.size,
    failures,
  };
}

/** A cheap content fingerprint (states with equal objects share one check). */
function sum(bytes: Uint8Array): number {
  let h = 2166136261;
  for (const b of bytes) h = Math.imul(h ^ b, 16777619);
  return h >>> 0;
}
