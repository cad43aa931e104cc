// The file system on Node (./files.ts): node:fs behind the handle and calls Deno's API has. A
// handle is a file descriptor with its own position (Node's calls take positions, Deno's files
// keep one), closed synchronously as Deno's are. Every error leaves as an OsErrors class
// (fromErrno). node:fs is imported dynamically so a browser bundle never names it statically.
import type { DirEntry, FileHandle, FileInfo, Files, OpenOptions, SeekWhence, SyncFileHandle } from "./files.ts";
import { fromErrno } from "./errors.ts";

const fs = await import("node:fs");
const fsp = await import("node:fs/promises");
const { tmpdir } = await import("node:os");
const { join } = await import("node:path");

/** Runs a node:fs call, turning its error into an OsErrors one. */
async function call<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw fromErrno(e);
  }
}

function info(s: import("node:fs").Stats): FileInfo {
  return {
    isFile: s.isFile(),
    isDirectory: s.isDirectory(),
    isSymlink: s.isSymbolicLink(),
    size: s.size,
    mtime: s.mtime,
    ino: s.ino,
    dev: s.dev,
  };
}

function flags(o: OpenOptions): number {
  const c = fs.constants;
  const write = o.write || o.append;
  let f = o.read && write ? c.O_RDWR : write ? c.O_WRONLY : c.O_RDONLY;
  if (o.append) f |= c.O_APPEND;
  if (o.truncate) f |= c.O_TRUNC;
  if (o.create || o.createNew) f |= c.O_CREAT;
  if (o.createNew) f |= c.O_EXCL;
  return f;
}

function promised<T>(run: (done: (e: NodeJS.ErrnoException | null, v: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => run((e, v) => e ? reject(fromErrno(e)) : resolve(v)));
}

function sync<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw fromErrno(e);
  }
}

class NodeFile implements FileHandle, SyncFileHandle {
  #fd: number;
  #pos = 0;
  #closed = false;

  constructor(fd: number) {
    this.#fd = fd;
  }

  #open(): number {
    if (this.#closed) throw new TypeError("Cannot use a closed file");
    return this.#fd;
  }

  async read(p: Uint8Array): Promise<number | null> {
    if (p.byteLength === 0) return 0;
    const fd = this.#open();
    const n = await promised<number>((done) => fs.read(fd, p, 0, p.byteLength, this.#pos, done));
    this.#pos += n;
    return n === 0 ? null : n;
  }

  readSync(p: Uint8Array): number | null {
    if (p.byteLength === 0) return 0;
    const fd = this.#open();
    const n = sync(() => fs.readSync(fd, p, 0, p.byteLength, this.#pos));
    this.#pos += n;
    return n === 0 ? null : n;
  }

  seekSync(offset: number, whence: SeekWhence): number {
    const base = whence === 0 ? 0 : whence === 1 ? this.#pos : this.statSync().size;
    return this.#moveTo(base + Number(offset));
  }

  statSync(): FileInfo {
    const fd = this.#open();
    return info(sync(() => fs.fstatSync(fd)));
  }

  #moveTo(to: number): number {
    if (to < 0) throw new TypeError(`Cannot seek to ${to}: before the start of the file`);
    this.#pos = to;
    return to;
  }

  async write(p: Uint8Array): Promise<number> {
    const fd = this.#open();
    const n = await promised<number>((done) => fs.write(fd, p, 0, p.byteLength, this.#pos, done));
    this.#pos += n;
    return n;
  }

  async seek(offset: number, whence: SeekWhence): Promise<number> {
    const base = whence === 0 ? 0 : whence === 1 ? this.#pos : (await this.stat()).size;
    return this.#moveTo(base + Number(offset));
  }

  async stat(): Promise<FileInfo> {
    const fd = this.#open();
    return info(await promised<import("node:fs").Stats>((done) => fs.fstat(fd, done)));
  }

  async truncate(len = 0): Promise<void> {
    const fd = this.#open();
    await promised<void>((done) => fs.ftruncate(fd, len, (e) => done(e, undefined)));
  }

  async syncData(): Promise<void> {
    const fd = this.#open();
    await promised<void>((done) => fs.fdatasync(fd, (e) => done(e, undefined)));
  }

  async sync(): Promise<void> {
    const fd = this.#open();
    await promised<void>((done) => fs.fsync(fd, (e) => done(e, undefined)));
  }

  close(): void {
    const fd = this.#open();
    this.#closed = true;
    sync(() => fs.closeSync(fd));
  }
}

async function* readDir(path: string): AsyncGenerator<DirEntry> {
  const entries = await call(() => fsp.readdir(path, { withFileTypes: true }));
  for (const e of entries) {
    yield { name: e.name, isFile: e.isFile(), isDirectory: e.isDirectory(), isSymlink: e.isSymbolicLink() };
  }
}

function writeFlag(options?: { createNew?: boolean }): string {
  return options?.createNew ? "wx" : "w";
}

/** node:fs as {@linkcode Files}. */
export const nodeFiles: Files = {
  open: async (path, options = { read: true }) => {
    const fd = await promised<number>((done) => fs.open(path, flags(options), options.mode ?? 0o666, done));
    return new NodeFile(fd);
  },
  openSync: (path) => new NodeFile(sync(() => fs.openSync(path, fs.constants.O_RDONLY))),
  stat: async (path) => info(await call(() => fsp.stat(path))),
  lstat: async (path) => info(await call(() => fsp.lstat(path))),
  rename: (from, to) => call(() => fsp.rename(from, to)),
  link: (from, to) => call(() => fsp.link(from, to)),
  remove: (path, options) =>
    call(async () => {
      if (options?.recursive) {
        await fsp.lstat(path); // NotFound when absent, as Deno's remove
        return await fsp.rm(path, { recursive: true, force: true });
      }
      const st = await fsp.lstat(path);
      return st.isDirectory() ? await fsp.rmdir(path) : await fsp.unlink(path);
    }),
  mkdir: (path, options) =>
    call(async () => void await fsp.mkdir(path, { recursive: options?.recursive ?? false, mode: options?.mode })),
  makeTempDir: (options) =>
    call(async () => {
      const dir = await fsp.mkdtemp(join(options?.dir ?? tmpdir(), options?.prefix ?? ""));
      if (!options?.suffix) return dir;
      await fsp.rename(dir, dir + options.suffix);
      return dir + options.suffix;
    }),
  readDir,
  realPath: (path) => call(() => fsp.realpath(path)),
  readFile: async (path) => {
    const b = await call(() => fsp.readFile(path));
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  },
  readTextFile: (path) => call(() => fsp.readFile(path, "utf8")),
  writeFile: (path, data, options) =>
    call(() => fsp.writeFile(path, data, { mode: options?.mode ?? 0o666, flag: writeFlag(options) })),
  writeTextFile: (path, data, options) =>
    call(() => fsp.writeFile(path, data, { mode: options?.mode ?? 0o666, flag: writeFlag(options) })),
  truncate: (path, len) => call(() => fsp.truncate(path, len ?? 0)),
  chmod: (path, mode) => call(() => fsp.chmod(path, mode)),
};
