// Records the file-system calls a save makes below one directory, as ALICE and CrashMonkey do, by
// replacing ckpt's one file interface (src/runtime/files.ts, `replaceFiles`) with one that makes
// every call for real and logs what it changed. While it is in place, saves write through it
// (direct writes too: `openDirect` stands aside), so the log holds every write of the save.
//
// Files and directories are named by ids (inodes of the model), not paths, so renames and links
// keep their identity; directory entries are (directory id, name) pairs. The pre-save state is a
// snapshot of the directory, all of it durable.

import { join, relative, resolve } from "node:path";
import { type FileHandle, type Files, files, type OpenOptions, replaceFiles } from "../../src/runtime/files.ts";

/** One node of the model: a regular file or a directory. */
export type NodeKind = "file" | "dir";

/** One recorded call's effect. `covers` of a sync: the ops (by index) that completed before it began. */
export type Op =
  | { op: "create"; dir: number; name: string; id: number }
  | { op: "mkdir"; dir: number; name: string; id: number }
  | { op: "link"; dir: number; name: string; id: number }
  | { op: "rename"; fromDir: number; fromName: string; dir: number; name: string; id: number }
  | { op: "unlink"; dir: number; name: string; id: number }
  | { op: "write"; id: number; offset: number; bytes: Uint8Array }
  | { op: "truncate"; id: number; size: number }
  | { op: "fsync"; id: number; covers: number }
  | { op: "dirsync"; id: number; covers: number };

/** The state before the save: every node and entry, all durable. The root directory is id 0. */
export interface Snapshot {
  kinds: Map<number, NodeKind>;
  data: Map<number, Uint8Array>;
  /** Entries per directory id: name to id. */
  entries: Map<number, Map<string, number>>;
}

/** A recording: the pre-save snapshot and the ops of the save, in the order they completed. */
export interface Recording {
  before: Snapshot;
  ops: Op[];
  /** How many ids exist (snapshot and new). */
  nodes: number;
  /** Node kinds, for every id. */
  kinds: Map<number, NodeKind>;
}

/** Takes a snapshot of `root` (files' bytes, directories), skipping names `skip` matches. */
export async function snapshot(root: string, skip: (name: string) => boolean): Promise<Snapshot> {
  const s: Snapshot = { kinds: new Map([[0, "dir"]]), data: new Map(), entries: new Map([[0, new Map()]]) };
  let next = 1;
  const visit = async (dir: string, id: number) => {
    for await (const e of Deno.readDir(dir)) {
      if (skip(e.name)) continue;
      const child = next++;
      s.entries.get(id)!.set(e.name, child);
      if (e.isDirectory) {
        s.kinds.set(child, "dir");
        s.entries.set(child, new Map());
        await visit(join(dir, e.name), child);
      } else if (e.isFile) {
        s.kinds.set(child, "file");
        s.data.set(child, await Deno.readFile(join(dir, e.name)));
      } else {
        throw new TypeError(`Cannot snapshot ${join(dir, e.name)}: not a file or directory`);
      }
    }
  };
  await visit(root, 0);
  return s;
}

/** The live name space as the recorder tracks it: path (relative to the root) to id. */
class Live {
  #paths = new Map<string, number>();
  kinds: Map<number, NodeKind>;
  next: number;

  constructor(s: Snapshot) {
    this.kinds = new Map(s.kinds);
    this.next = Math.max(...s.kinds.keys()) + 1;
    this.#paths.set("", 0);
    const walk = (id: number, at: string) => {
      for (const [name, child] of s.entries.get(id) ?? []) {
        const p = at === "" ? name : `${at}/${name}`;
        this.#paths.set(p, child);
        if (s.kinds.get(child) === "dir") walk(child, p);
      }
    };
    walk(0, "");
  }

  get(path: string): number | undefined {
    return this.#paths.get(path);
  }

  set(path: string, id: number): void {
    this.#paths.set(path, id);
  }

  /** Moves `from` (and, for a directory, everything below it) to `to`. */
  move(from: string, to: string): void {
    for (const [p, id] of [...this.#paths]) {
      if (p === from || p.startsWith(from + "/")) {
        this.#paths.delete(p);
        this.#paths.set(to + p.slice(from.length), id);
      }
    }
  }

  delete(path: string): void {
    this.#paths.delete(path);
  }

  /** Every path at or below `path`, deepest first. */
  below(path: string): string[] {
    return [...this.#paths.keys()].filter((p) => p === path || p.startsWith(path + "/"))
      .sort((a, b) => b.split("/").length - a.split("/").length);
  }

  fresh(kind: NodeKind): number {
    const id = this.next++;
    this.kinds.set(id, kind);
    return id;
  }
}

function split(rel: string): [string, string] {
  const cut = rel.lastIndexOf("/");
  return cut < 0 ? ["", rel] : [rel.slice(0, cut), rel.slice(cut + 1)];
}

/**
 * Runs `save` with every file-system call below `root` recorded; calls elsewhere pass through.
 * Names `skip` matches (the manager's lock file, taken with its own calls) are neither snapshot
 * nor recorded.
 */
export async function record(
  root: string,
  save: () => Promise<void>,
  skip: (name: string) => boolean = () => false,
): Promise<Recording> {
  root = resolve(await Deno.realPath(root));
  const before = await snapshot(root, skip);
  const live = new Live(before);
  const ops: Op[] = [];
  const real: Files = { ...files };
  /** The path relative to the root, or undefined outside it (or skipped). */
  const inside = (path: string): string | undefined => {
    const rel = relative(root, resolve(path));
    if (rel.startsWith("..") || rel.startsWith("/")) return undefined;
    if (rel.split("/").some(skip)) return undefined;
    return rel;
  };
  const parentOf = (rel: string): [number, string] | undefined => {
    const [dir, name] = split(rel);
    const id = live.get(dir);
    return id === undefined ? undefined : [id, name];
  };

  const open = async (path: string, options?: OpenOptions): Promise<FileHandle> => {
    const rel = inside(path);
    const existed = rel === undefined ? undefined : live.get(rel);
    const handle = await real.open(path, options);
    if (rel === undefined) return handle;
    let id = existed;
    if (id === undefined) {
      const writes = options?.write || options?.append || options?.truncate;
      if (!writes) return handle; // a read of a file made behind the recorder's back: nothing to log
      const at = parentOf(rel);
      if (!at || !(options?.create || options?.createNew)) {
        handle.close();
        throw unrecorded("open", path);
      }
      id = live.fresh("file");
      live.set(rel, id);
      ops.push({ op: "create", dir: at[0], name: at[1], id });
    } else if (options?.truncate && live.kinds.get(id) === "file") {
      ops.push({ op: "truncate", id, size: 0 });
    }
    return recordingHandle(handle, id, live.kinds.get(id)!, ops);
  };

  const remove = async (path: string, options?: { recursive?: boolean }) => {
    const rel = inside(path);
    const paths = rel === undefined ? [] : options?.recursive ? live.below(rel) : [rel];
    await real.remove(path, options);
    for (const p of paths) {
      const id = live.get(p);
      const at = parentOf(p);
      if (id === undefined || !at) throw unrecorded("remove", join(root, p));
      ops.push({ op: "unlink", dir: at[0], name: at[1], id });
      live.delete(p);
    }
  };

  const mkdir = async (path: string, options?: { recursive?: boolean; mode?: number }) => {
    const rel = inside(path);
    const missing: string[] = [];
    if (rel !== undefined) {
      for (let p = rel; p !== "" && live.get(p) === undefined; p = split(p)[0]) {
        missing.unshift(p);
        if (!options?.recursive) break;
      }
    }
    await real.mkdir(path, options);
    for (const p of missing) {
      const at = parentOf(p);
      if (!at) throw unrecorded("make directory", join(root, p));
      const id = live.fresh("dir");
      live.set(p, id);
      ops.push({ op: "mkdir", dir: at[0], name: at[1], id });
    }
  };

  const rename = async (from: string, to: string) => {
    const [a, b] = [inside(from), inside(to)];
    await real.rename(from, to);
    if (a === undefined || b === undefined) return;
    const id = live.get(a);
    const src = parentOf(a);
    const dst = parentOf(b);
    if (id === undefined || !src || !dst) throw unrecorded("rename", from);
    for (const p of live.below(b)) live.delete(p);
    live.move(a, b);
    ops.push({ op: "rename", fromDir: src[0], fromName: src[1], dir: dst[0], name: dst[1], id });
  };

  const link = async (from: string, to: string) => {
    const [a, b] = [inside(from), inside(to)];
    await real.link(from, to);
    if (a === undefined || b === undefined) return;
    const id = live.get(a);
    const dst = parentOf(b);
    if (id === undefined || !dst) throw unrecorded("link", from);
    live.set(b, id);
    ops.push({ op: "link", dir: dst[0], name: dst[1], id });
  };

  const writeFile = async (path: string, data: Uint8Array, options?: { mode?: number; createNew?: boolean }) => {
    const f = await files.open(path, { // the recording open, in its turn
      write: true,
      create: true,
      truncate: !options?.createNew,
      createNew: options?.createNew ?? false,
      mode: options?.mode ?? 0o666,
    });
    try {
      let off = 0;
      while (off < data.byteLength) off += await f.write(data.subarray(off));
    } finally {
      f.close();
    }
  };

  const truncate = async (path: string, len?: number) => {
    const rel = inside(path);
    await real.truncate(path, len);
    const id = rel === undefined ? undefined : live.get(rel);
    if (id !== undefined) ops.push({ op: "truncate", id, size: len ?? 0 });
  };

  // Calls that change or look up names run one at a time, each with its bookkeeping: otherwise a
  // writer whose mkdir found a directory made could go on inside it before the call that made it
  // was logged (its answer not yet handled), and what it made there would go unrecorded.
  let queue: Promise<unknown> = Promise.resolve();
  const oneAtATime = <A extends unknown[], T>(f: (...args: A) => Promise<T>) => (...args: A): Promise<T> => {
    const run = queue.then(() => f(...args));
    queue = run.catch(() => {});
    return run;
  };
  const restore = replaceFiles({
    ...real,
    open: oneAtATime(open),
    remove: oneAtATime(remove),
    mkdir: oneAtATime(mkdir),
    rename: oneAtATime(rename),
    link: oneAtATime(link),
    writeFile,
    writeTextFile: (path, text, options) => writeFile(path, new TextEncoder().encode(text), options),
    truncate: oneAtATime(truncate),
  });
  try {
    await save();
  } finally {
    restore();
  }
  return { before, ops, nodes: live.next, kinds: live.kinds };
}

/** The error of a call the recorder cannot log: it names what was made behind its back. */
function unrecorded(verb: string, path: string): Error {
  return new Error(
    `Cannot record ${verb} ${
      JSON.stringify(path)
    }: it or its directory was made behind the recorder's back (not through files)`,
  );
}

/** A handle that logs writes at the position it tracks, truncations and syncs. */
function recordingHandle(handle: FileHandle, id: number, kind: NodeKind, ops: Op[]): FileHandle {
  let pos = 0;
  const synced = async (run: () => Promise<void>) => {
    const covers = ops.length;
    await run();
    ops.push(kind === "dir" ? { op: "dirsync", id, covers } : { op: "fsync", id, covers });
  };
  return {
    read: async (p) => {
      const n = await handle.read(p);
      if (n !== null) pos += n;
      return n;
    },
    write: async (p) => {
      const at = pos;
      const n = await handle.write(p);
      pos = at + n;
      ops.push({ op: "write", id, offset: at, bytes: p.slice(0, n) });
      return n;
    },
    seek: async (offset, whence) => pos = await handle.seek(offset, whence),
    stat: () => handle.stat(),
    truncate: async (len) => {
      await handle.truncate(len);
      ops.push({ op: "truncate", id, size: len ?? 0 });
    },
    syncData: () => synced(() => handle.syncData()),
    sync: () => synced(() => handle.sync()),
    close: () => handle.close(),
  };
}
