// The page of tests/web/opfs_load_test.ts: the core entry, and how many loads read an OPFS file
// through a sync access handle.
export * from "./core_entry.ts";
export { opfsHandleReadsForTests } from "../../../src/storage/_opfs_read.ts";
