// Rebuilding an index from the checkpoint files in a directory (none, or a damaged one).

import { loadCheckpoint } from "../io/load.ts";
import { sha256 } from "../format/_hash.ts";
import { blobKey, decodeManifest, readIncremental } from "./_blobs.ts";
import { isDamage } from "./_errors.ts";
import type { StoredEntry } from "./_index.ts";
import type { Location } from "./_location.ts";
import { MANIFEST_SUFFIX } from "./_pattern.ts";
import type { Resolved } from "./_resolve.ts";
import { OsErrors } from "../runtime/errors.ts";
import { files } from "../runtime/files.ts";

/** The binary codec's magic bytes. */
const MAGIC = [0x89, 0x43, 0x4b, 0x50, 0x54, 0x0d, 0x0a, 0x1a];

/** Whether an object starts with the binary codec's magic bytes. */
export async function startsWithBinary(loc: Location, key: string): Promise<boolean> {
  const head = await loc.head(key, MAGIC.length);
  return head.byteLength === MAGIC.length && MAGIC.every((b, i) => head[i] === b);
}

/** The largest manifest read back. */
export const MAX_MANIFEST_BYTES = 256 * 2 ** 20;

/**
 * The entries of the checkpoint files in a directory that has no index (or a damaged one): each
 * file whose name matches the pattern is read and verified in full; files that do not verify
 * are reported, and on a local directory renamed aside to `.NAME.unverified` (unless the manager
 * is read-only: then nothing is renamed, and the caller writes nothing either). Names made by
 * `formatUnique` are never adopted: those are saves that were not committed.
 */
export async function adopt(loc: Location, o: Resolved): Promise<StoredEntry[]> {
  const found: { step: number; name: string; manifest: boolean }[] = [];
  for await (const f of loc.store.list("")) {
    if (f.key.includes("/")) continue;
    const manifest = f.key.endsWith(MANIFEST_SUFFIX);
    const step = o.pattern.parse(manifest ? f.key.slice(0, -MANIFEST_SUFFIX.length) : f.key);
    if (step !== undefined) found.push({ step, name: f.key, manifest });
  }
  found.sort((a, b) => a.step - b.step || Number(a.manifest) - Number(b.manifest));
  const entries: StoredEntry[] = [];
  const quarantine = async (name: string, why: string) => {
    if (loc.dir === undefined || o.readOnly) {
      o.onWarning(`Not adopting ${loc.name(name)}: ${why}; it is left in place`);
      return;
    }
    o.onWarning(`Not adopting ${loc.name(name)}: ${why}; it is renamed to .${name}.unverified`);
    await files.rename(loc.name(name), loc.name(`.${name}.unverified`)).catch(() => {});
  };
  for (const f of found) {
    const path = loc.name(f.name);
    if (entries.at(-1)?.step === f.step) {
      await quarantine(f.name, `step ${f.step} is already adopted from another file`);
      continue;
    }
    try {
      const info = await loc.store.head(f.name);
      if (info === undefined) throw new OsErrors.NotFound(`${path} is gone`);
      const savedAt = info.lastModified?.toISOString() ?? new Date().toISOString();
      const digest = await loc.digest(f.name, sha256());
      let entry: StoredEntry;
      if (f.manifest) {
        const got = await loc.read(f.name, MAX_MANIFEST_BYTES, "checkpoint manifest");
        if (got === undefined) throw new OsErrors.NotFound(`${path} is gone`);
        const manifest = decodeManifest(got.bytes, path, o.limits);
        const blobs = new Map<string, number>();
        for (const t of manifest.tensors) {
          const size = await loc.size(blobKey(t.blob));
          if (size === undefined) throw new OsErrors.NotFound(`blob ${loc.name(blobKey(t.blob))} is missing`);
          blobs.set(t.blob, size);
        }
        const checkpoint = await readIncremental(loc, manifest);
        let total = got.bytes.byteLength;
        for (const size of blobs.values()) total += size;
        entry = {
          step: f.step,
          file: f.name,
          kind: "incremental",
          bytes: total,
          bytesWritten: total,
          sha256: digest,
          savedAt,
          metadata: checkpoint.metadata,
          tensorCount: checkpoint.tensors.length,
          blobs,
        };
      } else {
        const options = { ...o.limits, codecs: o.codecs, sha256: digest };
        const checkpoint = loc.dir !== undefined
          ? await loadCheckpoint(path, options)
          : await loadCheckpoint((await loc.store.get(f.name)).body, options);
        entry = {
          step: f.step,
          file: f.name,
          kind: "full",
          bytes: info.size,
          bytesWritten: info.size,
          sha256: digest,
          savedAt,
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
  if (entries.length > 0) {
    o.onWarning(
      `${
        o.readOnly ? "A writing manager would adopt" : "Adopted"
      } ${entries.length} checkpoint(s) found in ${loc.where} without an index: steps ${
        entries.map((e) => e.step).join(", ")
      }`,
    );
  }
  return entries;
}
