// Rebuilding an index from the checkpoint files in a directory (none, or a damaged one).

import { join } from "node:path";
import { loadCheckpoint } from "../io/load.ts";
import { sha256 } from "../format/_hash.ts";
import { blobPath, decodeManifest, readIncremental } from "./_blobs.ts";
import { isDamage } from "./_errors.ts";
import { type StoredEntry, writeIndex } from "./_index.ts";
import { MANIFEST_SUFFIX } from "./_pattern.ts";
import { policyOf, type Resolved } from "./_resolve.ts";

async function fileSha256(path: string): Promise<string> {
  const hash = sha256();
  using file = await Deno.open(path, { read: true });
  for await (const chunk of file.readable) hash.update(chunk);
  return hash.digest("hex");
}

/** Whether a file starts with the binary codec's magic bytes. */
export async function startsWithBinary(path: string): Promise<boolean> {
  using f = await Deno.open(path, { read: true });
  const head = new Uint8Array(8);
  let n = 0;
  while (n < head.byteLength) {
    const r = await f.read(head.subarray(n));
    if (r === null) break;
    n += r;
  }
  const magic = [0x89, 0x43, 0x4b, 0x50, 0x54, 0x0d, 0x0a, 0x1a];
  return n === 8 && magic.every((b, i) => head[i] === b);
}

/**
 * Builds an index from the checkpoint files in a directory that has none (or a damaged one):
 * each file matching the pattern is read and verified in full; files that do not verify are left
 * alone and reported.
 */
export async function adopt(dir: string, o: Resolved): Promise<StoredEntry[]> {
  const found: { step: number; name: string; manifest: boolean }[] = [];
  for await (const f of Deno.readDir(dir)) {
    if (!f.isFile) continue;
    const manifest = f.name.endsWith(MANIFEST_SUFFIX);
    const step = o.pattern.parse(manifest ? f.name.slice(0, -MANIFEST_SUFFIX.length) : f.name);
    if (step !== undefined) found.push({ step, name: f.name, manifest });
  }
  found.sort((a, b) => a.step - b.step || Number(a.manifest) - Number(b.manifest));
  const entries: StoredEntry[] = [];
  const quarantine = (name: string, why: string) => {
    o.onWarning(`Not adopting ${join(dir, name)}: ${why}; it is renamed to .${name}.unverified`);
    return Deno.rename(join(dir, name), join(dir, `.${name}.unverified`)).catch(() => {});
  };
  for (const f of found) {
    const path = join(dir, f.name);
    if (entries.at(-1)?.step === f.step) {
      await quarantine(f.name, `step ${f.step} is already adopted from another file`);
      continue;
    }
    try {
      const stat = await Deno.stat(path);
      const digest = await fileSha256(path);
      let entry: StoredEntry;
      if (f.manifest) {
        const bytes = await Deno.readFile(path);
        const manifest = decodeManifest(bytes, path, o.limits);
        const blobs = new Map<string, number>();
        for (const t of manifest.tensors) {
          const size = (await Deno.stat(blobPath(dir, t.blob))).size;
          blobs.set(t.blob, size);
        }
        const checkpoint = await readIncremental(dir, manifest);
        let total = bytes.byteLength;
        for (const size of blobs.values()) total += size;
        entry = {
          step: f.step,
          file: f.name,
          kind: "incremental",
          bytes: total,
          bytesWritten: total,
          sha256: digest,
          savedAt: stat.mtime?.toISOString() ?? new Date().toISOString(),
          metadata: checkpoint.metadata,
          tensorCount: checkpoint.tensors.length,
          blobs,
        };
      } else {
        const checkpoint = await loadCheckpoint(path, { ...o.limits, codecs: o.codecs, sha256: digest });
        entry = {
          step: f.step,
          file: f.name,
          kind: "full",
          bytes: stat.size,
          bytesWritten: stat.size,
          sha256: digest,
          savedAt: stat.mtime?.toISOString() ?? new Date().toISOString(),
          metadata: checkpoint.metadata,
          tensorCount: checkpoint.tensors.length,
        };
      }
      if (entry.metadata.step !== f.step) {
        await quarantine(f.name, `its name says step ${f.step} but it holds step ${entry.metadata.step}`);
        continue;
      }
      entries.push(entry);
    } catch (e) {
      if (!isDamage(e)) throw e;
      await quarantine(f.name, (e as Error).message);
    }
  }
  // Written even when empty: from now on a checkpoint file the index does not list is uncommitted.
  await writeIndex(dir, entries, policyOf(o), o.sync);
  if (entries.length > 0) {
    o.onWarning(
      `Adopted ${entries.length} checkpoint(s) found in ${dir} without an index: steps ${
        entries.map((e) => e.step).join(", ")
      }`,
    );
  }
  return entries;
}
