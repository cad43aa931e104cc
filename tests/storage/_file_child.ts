// A child for the kill test: starts a FileStore write, says so, and keeps writing until killed.
import { FileStore } from "../../src/storage/file.ts";

const [root, key] = Deno.args as [string, string];
const w = await new FileStore(root).writer(key);
await w.write(new Uint8Array(3 * 2 ** 20).fill(1));
console.log("writing");
for (;;) {
  await w.write(new Uint8Array(2 ** 20).fill(2));
  await new Promise((r) => setTimeout(r, 20));
}
