/**
 * What a save made durable, read from an `strace -f -y` log of its system calls: which paths it
 * flushed (fsync, fdatasync, sync_file_range, syncfs) and which it renamed, in order, with each
 * flushed path followed through the renames made after it, so a temporary file flushed and then
 * renamed into place is reported under the name it ends with. Used by bench/peer_facts.ts.
 *
 * @module
 */

/** One flush or rename, in the order the log completed them. */
export type SyncEvent =
  | { kind: "sync"; call: string; path: string }
  | { kind: "rename"; from: string; to: string };

/** A flushed path: as flushed, and where the renames after the flush left it. */
export interface Synced {
  call: string;
  path: string;
  finalPath: string;
}

const FLUSH = /^(fsync|fdatasync|sync_file_range|syncfs)\(\d+<([^>]*)>.*\)\s+=\s+0\b/;
const RENAME = /^rename\("((?:[^"\\]|\\.)*)", "((?:[^"\\]|\\.)*)"\)\s+=\s+0\b/;
const RENAME_AT =
  /^renameat2?\((\w+)(?:<([^>]*)>)?, "((?:[^"\\]|\\.)*)", (\w+)(?:<([^>]*)>)?, "((?:[^"\\]|\\.)*)".*\)\s+=\s+0\b/;

function resolve(dir: string | undefined, name: string): string {
  if (name.startsWith("/") || dir === undefined) return name;
  return `${dir.replace(/\/$/, "")}/${name}`;
}

/**
 * The flushes and renames that succeeded, from an `strace -f -y` log (one call per line, each
 * line starting with the thread id; a call that another thread interrupted is logged as
 * "<unfinished ...>" and completed by a "<... NAME resumed>" line of the same thread).
 *
 * @example
 * ```ts
 * import { syncEvents } from "./_strace.ts";
 * import assert from "node:assert/strict";
 * const log = [
 *   '41 fsync(5</d/a.tmp>) = 0',
 *   '41 renameat2(AT_FDCWD</d>, "a.tmp", AT_FDCWD</d>, "a", 0) = 0',
 * ].join("\n");
 * assert.deepEqual(syncEvents(log), [
 *   { kind: "sync", call: "fsync", path: "/d/a.tmp" },
 *   { kind: "rename", from: "/d/a.tmp", to: "/d/a" },
 * ]);
 * ```
 */
export function syncEvents(log: string): SyncEvent[] {
  const pending = new Map<string, string>();
  const events: SyncEvent[] = [];
  for (const raw of log.split("\n")) {
    const m = raw.match(/^(\d+)\s+(.*)$/);
    if (!m) continue;
    const [, tid, rest] = m as unknown as [string, string, string];
    let call = rest;
    if (call.endsWith(" <unfinished ...>")) {
      pending.set(tid, call.slice(0, -" <unfinished ...>".length));
      continue;
    }
    const resumed = call.match(/^<\.\.\. \w+ resumed>(.*)$/);
    if (resumed) {
      const head = pending.get(tid);
      if (head === undefined) continue;
      pending.delete(tid);
      call = head + resumed[1]!;
    }
    const flush = call.match(FLUSH);
    if (flush) {
      events.push({ kind: "sync", call: flush[1]!, path: flush[2]! });
      continue;
    }
    const rename = call.match(RENAME);
    if (rename) {
      events.push({ kind: "rename", from: rename[1]!, to: rename[2]! });
      continue;
    }
    const at = call.match(RENAME_AT);
    if (at) events.push({ kind: "rename", from: resolve(at[2], at[3]!), to: resolve(at[5], at[6]!) });
  }
  return events;
}

/**
 * Each flush of `events` with the path it names after every later rename (a rename of the path
 * itself or of a directory above it).
 *
 * @example
 * ```ts
 * import { flushedPaths } from "./_strace.ts";
 * import assert from "node:assert/strict";
 * assert.deepEqual(
 *   flushedPaths([
 *     { kind: "sync", call: "fsync", path: "/d/tmp-1/data" },
 *     { kind: "rename", from: "/d/tmp-1", to: "/d/step-1" },
 *     { kind: "sync", call: "fsync", path: "/d" },
 *   ]),
 *   [
 *     { call: "fsync", path: "/d/tmp-1/data", finalPath: "/d/step-1/data" },
 *     { call: "fsync", path: "/d", finalPath: "/d" },
 *   ],
 * );
 * ```
 */
export function flushedPaths(events: readonly SyncEvent[]): Synced[] {
  const out: Synced[] = [];
  events.forEach((e, i) => {
    if (e.kind !== "sync") return;
    let path = e.path;
    for (const later of events.slice(i + 1)) {
      if (later.kind !== "rename") continue;
      if (path === later.from) path = later.to;
      else if (path.startsWith(later.from + "/")) path = later.to + path.slice(later.from.length);
    }
    out.push({ call: e.call, path: e.path, finalPath: path });
  });
  return out;
}
