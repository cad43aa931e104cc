// The crash states a power loss can leave after a recorded save (_record.ts), under the
// persistence model of docs/reliability.md ("Crash states"), and a driver that materializes each
// into a fresh directory and runs a recovery check on it.
//
// At crash point k (after the first k ops completed) an op is durable when a sync that began
// after it completed before the crash: data ops (write, truncate) of a file by an fsync or
// fdatasync of that file; directory ops (create, mkdir, link, rename, unlink) by an fsync of the
// directory they change (either one, for a rename). Every other op that happened is pending: a
// pending directory op persists whole or not at all, in any subset closed under name
// dependencies (an unlink or rename of a name persists only with the op that made that name); a
// pending write persists any subset of its 4 KiB blocks (in at most 3 groups), or only the size
// it gave the file (its blocks read as zeros); a pending truncate persists or not.

import { join } from "node:path";
import type { Op, Recording } from "./_record.ts";
import { prng } from "../_util.ts";

/** Block size of partial persistence. */
export const BLOCK = 4096;
/** A write persists in at most this many groups of blocks. */
const GROUPS = 3;

/** One pending op's choices: how many, and a label per choice. */
interface Pending {
  index: number;
  choices: number;
  /** For a write: the byte ranges of its groups. */
  groups?: [number, number][];
  /** For a write: whether its last choice is "size only". */
  sizeOnly?: boolean;
}

/** The crash states at one crash point. */
interface Point {
  k: number;
  forced: Set<number>;
  /** Closed subsets of the pending directory ops, as lists of op indexes. */
  dirSets: number[][];
  dirPending: number[];
  data: Pending[];
  count: number;
}

function isDirOp(op: Op): boolean {
  return op.op === "create" || op.op === "mkdir" || op.op === "link" || op.op === "rename" || op.op === "unlink";
}

function dirsOf(op: Op): number[] {
  if (op.op === "rename") return [op.fromDir, op.dir];
  if ("dir" in op) return [op.dir];
  return [];
}

/** For each directory op, the earlier op that made the name it consumes (rename's source, unlink's name). */
function dependencies(ops: Op[]): Map<number, number> {
  const deps = new Map<number, number>();
  const maker = new Map<string, number>();
  ops.forEach((op, i) => {
    if (op.op === "rename" || op.op === "unlink") {
      const key = op.op === "rename" ? `${op.fromDir}/${op.fromName}` : `${op.dir}/${op.name}`;
      const m = maker.get(key);
      if (m !== undefined) deps.set(i, m);
      maker.delete(key);
    }
    if (op.op === "create" || op.op === "mkdir" || op.op === "link" || op.op === "rename") {
      maker.set(`${op.dir}/${op.name}`, i);
    }
  });
  return deps;
}

/** Groups of a write's blocks: [start, end) byte ranges at block boundaries, at most GROUPS. */
function groupsOf(offset: number, length: number): [number, number][] {
  const end = offset + length;
  const cuts = [offset];
  for (let b = (Math.floor(offset / BLOCK) + 1) * BLOCK; b < end; b += BLOCK) cuts.push(b);
  const blocks = cuts.map((c, i) => [c, cuts[i + 1] ?? end] as [number, number]);
  if (blocks.length <= GROUPS) return blocks;
  const per = Math.ceil(blocks.length / GROUPS);
  const groups: [number, number][] = [];
  for (let i = 0; i < blocks.length; i += per) {
    groups.push([blocks[i]![0], blocks[Math.min(i + per, blocks.length) - 1]![1]]);
  }
  return groups;
}

const MAX_DIR_PENDING = 18;

function point(rec: Recording, k: number, deps: Map<number, number>): Point {
  const ops = rec.ops.slice(0, k);
  const forced = new Set<number>();
  for (const op of ops) {
    if (op.op !== "fsync" && op.op !== "dirsync") continue;
    for (let i = 0; i < op.covers; i++) {
      const o = ops[i]!;
      if (op.op === "fsync" && (o.op === "write" || o.op === "truncate") && o.id === op.id) forced.add(i);
      if (op.op === "dirsync" && isDirOp(o) && dirsOf(o).includes(op.id)) forced.add(i);
    }
  }
  // A forced op takes the op that made its name with it.
  for (const i of [...forced].sort((a, b) => b - a)) {
    for (let d = deps.get(i); d !== undefined && !forced.has(d); d = deps.get(d)) forced.add(d);
  }
  const dirPending = ops.map((_, i) => i).filter((i) => isDirOp(ops[i]!) && !forced.has(i));
  if (dirPending.length > MAX_DIR_PENDING) {
    throw new RangeError(`Cannot enumerate crash point ${k}: ${dirPending.length} pending directory ops`);
  }
  const dirSets: number[][] = [];
  for (let mask = 0; mask < 2 ** dirPending.length; mask++) {
    const set = dirPending.filter((_, b) => mask & (1 << b));
    const has = new Set(set);
    if (set.every((i) => deps.get(i) === undefined || forced.has(deps.get(i)!) || has.has(deps.get(i)!))) {
      dirSets.push(set);
    }
  }
  const data: Pending[] = [];
  const sizes = new Map<number, number>();
  for (const [id, bytes] of rec.before.data) sizes.set(id, bytes.byteLength);
  ops.forEach((op, i) => {
    if (op.op === "write") {
      const end = op.offset + op.bytes.byteLength;
      const grows = end > (sizes.get(op.id) ?? 0);
      sizes.set(op.id, Math.max(end, sizes.get(op.id) ?? 0));
      if (forced.has(i) || op.bytes.byteLength === 0) return;
      const groups = groupsOf(op.offset, op.bytes.byteLength);
      data.push({ index: i, groups, sizeOnly: grows, choices: 2 ** groups.length + (grows ? 1 : 0) });
    } else if (op.op === "truncate") {
      sizes.set(op.id, op.size);
      if (!forced.has(i)) data.push({ index: i, choices: 2 });
    }
  });
  const count = data.reduce((n, p) => n * p.choices, dirSets.length);
  return { k, forced, dirSets, dirPending, data, count };
}

/** One crash state: a crash point and the choice for each of its pending ops. */
export interface CrashState {
  k: number;
  /** Pending directory ops that persisted. */
  dirs: number[];
  /** Per pending data op (by op index): the choice (a mask of groups; 2^groups is "size only"). */
  data: Map<number, number>;
  point: Point;
}

/** Every crash state of a recording, by number: `count` of them, `at(i)` the i-th. */
export function crashStates(
  rec: Recording,
): { count: number; points: number; last: number; at(i: number): CrashState } {
  const deps = dependencies(rec.ops);
  const points: Point[] = [];
  for (let k = 0; k <= rec.ops.length; k++) points.push(point(rec, k, deps));
  const count = points.reduce((n, p) => n + p.count, 0);
  return {
    count,
    points: points.length,
    last: points.at(-1)!.count,
    at(i) {
      let p = points[0]!;
      for (p of points) {
        if (i < p.count) break;
        i -= p.count;
      }
      const data = new Map<number, number>();
      for (const d of p.data) {
        data.set(d.index, i % d.choices);
        i = Math.floor(i / d.choices);
      }
      return { k: p.k, dirs: p.dirSets[i]!, data, point: p };
    },
  };
}

/** A file or directory of a materialized state, by path below the root. */
export interface TreeEntry {
  path: string;
  bytes?: Uint8Array;
}

/** Applies a crash state to the pre-save snapshot: the tree a recovery would find. */
export function materialize(rec: Recording, s: CrashState): TreeEntry[] {
  const entries = new Map<number, Map<string, number>>();
  for (const [id, m] of rec.before.entries) entries.set(id, new Map(m));
  const data = new Map<number, Uint8Array>();
  for (const [id, b] of rec.before.data) data.set(id, b);
  const dirs = new Set(s.dirs);
  const grow = (id: number, size: number) => {
    const old = data.get(id) ?? new Uint8Array(0);
    if (old.byteLength >= size) return old;
    const b = new Uint8Array(size);
    b.set(old);
    data.set(id, b);
    return b;
  };
  const own = (id: number) => {
    const b = (data.get(id) ?? new Uint8Array(0)).slice();
    data.set(id, b);
    return b;
  };
  for (let i = 0; i < s.k; i++) {
    const op = rec.ops[i]!;
    const persisted = s.point.forced.has(i) || dirs.has(i);
    switch (op.op) {
      case "create":
      case "mkdir":
      case "link":
        if (!persisted) break;
        if (op.op === "mkdir") entries.set(op.id, entries.get(op.id) ?? new Map());
        if (!entries.has(op.dir)) entries.set(op.dir, new Map());
        entries.get(op.dir)!.set(op.name, op.id);
        break;
      case "rename":
        if (!persisted) break;
        entries.get(op.fromDir)?.delete(op.fromName);
        if (!entries.has(op.dir)) entries.set(op.dir, new Map());
        entries.get(op.dir)!.set(op.name, op.id);
        break;
      case "unlink":
        if (persisted && entries.get(op.dir)?.get(op.name) === op.id) entries.get(op.dir)!.delete(op.name);
        break;
      case "write": {
        const choice = s.point.forced.has(i) ? -1 : s.data.get(i) ?? 0;
        const end = op.offset + op.bytes.byteLength;
        if (choice === -1) {
          own(op.id);
          grow(op.id, end).set(op.bytes, op.offset);
          break;
        }
        const groups = groupsOf(op.offset, op.bytes.byteLength);
        if (choice === 2 ** groups.length) {
          own(op.id);
          grow(op.id, end); // the size, without the data
          break;
        }
        own(op.id);
        groups.forEach(([a, b], g) => {
          if (!(choice & (1 << g))) return;
          grow(op.id, b).set(op.bytes.subarray(a - op.offset, b - op.offset), a);
        });
        break;
      }
      case "truncate": {
        if (!(s.point.forced.has(i) || s.data.get(i) === 1)) break;
        const b = own(op.id);
        data.set(op.id, b.byteLength >= op.size ? b.slice(0, op.size) : grow(op.id, op.size));
        break;
      }
    }
  }
  const out: TreeEntry[] = [];
  const seen = new Set<number>([0]);
  const walk = (id: number, at: string) => {
    for (const [name, child] of [...(entries.get(id) ?? [])].sort(([a], [b]) => a < b ? -1 : 1)) {
      const path = at === "" ? name : `${at}/${name}`;
      if (rec.kinds.get(child) === "dir") {
        if (seen.has(child)) continue;
        seen.add(child);
        out.push({ path });
        walk(child, path);
      } else {
        out.push({ path, bytes: data.get(child) ?? new Uint8Array(0) });
      }
    }
  };
  walk(0, "");
  return out;
}

/** What a crash state lost, in words: the pending ops and what of each persisted. */
export function describe(rec: Recording, s: CrashState): string {
  const parts: string[] = [`crash after op ${s.k} of ${rec.ops.length}`];
  for (const i of s.point.dirPending) {
    parts.push(`${s.dirs.includes(i) ? "kept" : "lost"} #${i} ${opText(rec.ops[i]!)}`);
  }
  for (const d of s.point.data) {
    const c = s.data.get(d.index)!;
    const what = d.groups === undefined
      ? (c ? "kept" : "lost")
      : c === 2 ** d.groups.length
      ? "size only"
      : `blocks ${d.groups.map((_, g) => c & (1 << g) ? "1" : "0").join("")}`;
    parts.push(`${what} #${d.index} ${opText(rec.ops[d.index]!)}`);
  }
  return parts.join("; ");
}

function opText(op: Op): string {
  switch (op.op) {
    case "write":
      return `write node ${op.id} @${op.offset} +${op.bytes.byteLength}`;
    case "truncate":
      return `truncate node ${op.id} to ${op.size}`;
    case "rename":
      return `rename ${op.fromName} -> ${op.name} (node ${op.id})`;
    case "fsync":
    case "dirsync":
      return `${op.op} node ${op.id}`;
    default:
      return `${op.op} ${op.name} (node ${op.id})`;
  }
}

/** A tree's identity: its paths and the SHA-256 of each file. */
export async function treeKey(tree: TreeEntry[]): Promise<string> {
  const parts: string[] = [];
  for (const e of tree) {
    const h = e.bytes
      ? Array.from(
        new Uint8Array(await crypto.subtle.digest("SHA-256", e.bytes as Uint8Array<ArrayBuffer>)),
        (b) => b.toString(16).padStart(2, "0"),
      ).join("")
      : "dir";
    parts.push(`${e.path}=${h}`);
  }
  return parts.join("\n");
}

/** Writes a tree into `dir` (which exists, empty). */
export async function writeTree(dir: string, tree: TreeEntry[]): Promise<void> {
  for (const e of tree) {
    if (e.bytes) await Deno.writeFile(join(dir, e.path), e.bytes);
    else await Deno.mkdir(join(dir, e.path));
  }
}

/**
 * Which states to check: all of them when there are at most `cap`, else `cap` distinct ones drawn
 * with `seed`, the `last` states (those of the last crash point: the save returned) first, up to
 * a quarter of the cap.
 */
export function choose(count: number, cap: number, seed: number, last = 0): number[] {
  if (count <= cap) return Array.from({ length: count }, (_, i) => i);
  const random = prng(seed);
  const picked = new Set<number>();
  for (let i = count - Math.min(last, Math.floor(cap / 4)); i < count; i++) picked.add(i);
  while (picked.size < cap) picked.add(Math.floor(random() * count));
  return [...picked].sort((a, b) => a - b);
}
