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
