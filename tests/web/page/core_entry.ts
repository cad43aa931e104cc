// What the browser tests' pages import: the library's web entries, as one module.
export * from "../../../mod.ts";
export {
  OPFS_TEMP_DIR,
  OpfsStore,
  persistStorage,
  storageEstimate,
  StorageFullError,
} from "../../../src/storage/opfs.ts";
export { readTfjsArtifacts, writeTfjsArtifacts } from "../../../src/interop/tfjs_artifacts.ts";
export { reserveHeadroom } from "../../../src/format/_headroom.ts";
export { prefixRoom } from "../../../src/format/codecs/binary.ts";
export { opfsWorkerWritesForTests } from "../../../src/storage/_opfs_worker_write.ts";

/**
 * Counts the page's WebCrypto digests (ckpt asks for `crypto.subtle` at each call): the size of
 * each call's input, the page's own digest (uncounted), and `restore` to stop counting. With
 * `fail`, each counted call rejects (as an engine's failed digest would).
 */
export function countWebDigests(fail = false): {
  sizes: number[];
  digest: (algorithm: AlgorithmIdentifier, bytes: BufferSource) => Promise<ArrayBuffer>;
  restore(): void;
} {
  const subtle = crypto.subtle;
  const digest = subtle.digest.bind(subtle);
  const sizes: number[] = [];
  Object.defineProperty(subtle, "digest", {
    configurable: true,
    value: (algorithm: AlgorithmIdentifier, bytes: BufferSource) => {
      sizes.push(bytes.byteLength);
      return fail ? Promise.reject(new DOMException("no digest today", "OperationError")) : digest(algorithm, bytes);
    },
  });
  return { sizes, digest, restore: () => delete (subtle as { digest?: unknown }).digest };
}
