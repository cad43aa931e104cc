// The OPFS contract test's page: the store RPC and the library.
export { rpc } from "./store_rpc.ts";
export * from "./core_entry.ts";
