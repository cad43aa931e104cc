// Direct writes and reads on the real kernel, in a process of its own (run with or without FFI): prints
// what openDirect gave, which writes it took or refused, and whether the file holds their bytes.
import { alignedBuffer, DIRECT_ALIGN, openDirect, openDirectRead } from "../../src/storage/_direct_io.ts";
import { freshBuffer } from "../../src/storage/_huge_pages.ts";
import { FileStore } from "../../src/storage/file.ts";

const dir = await Deno.makeTempDir();
if (Deno.args[0] === "read") {
  // Direct reads of a file of 3 blocks and 100 bytes: whole, its last block (short: the end),
  // past its end, and refused ones.
  try {
    const path = `${dir}/r.bin`;
    const data = new Uint8Array(3 * DIRECT_ALIGN + 100).map((_, i) => (i * 13 + 5) & 255);
    await Deno.writeFile(path, data);
    const missing = openDirectRead(`${dir}/missing.bin`) !== undefined;
    const r = openDirectRead(path);
    if (!r) {
      console.log(JSON.stringify({ opened: false, missing }));
    } else {
      const buffer = alignedBuffer(4 * DIRECT_ALIGN);
      const accepts = [r.accepts(buffer), r.accepts(buffer.subarray(1))];
      const whole = await r.read(buffer, 0);
      const wholeExact = buffer.subarray(0, whole).every((b, i) => b === data[i]);
      const last = await r.read(buffer.subarray(0, DIRECT_ALIGN), 3 * DIRECT_ALIGN);
      const lastExact = buffer.subarray(0, last).every((b, i) => b === data[3 * DIRECT_ALIGN + i]);
      const reads = [
        whole,
        last,
        await r.read(buffer.subarray(0, DIRECT_ALIGN), 4 * DIRECT_ALIGN), // past the end: nothing
        await r.read(buffer.subarray(1, DIRECT_ALIGN + 1), 0), // an unaligned buffer: refused
        await r.read(buffer.subarray(0, DIRECT_ALIGN), 100), // an unaligned offset: refused
      ];
      r.close();
      r.close(); // twice is harmless
      reads.push(await r.read(buffer.subarray(0, DIRECT_ALIGN), 0)); // after close: refused
      console.log(JSON.stringify({ opened: true, missing, accepts, reads, exact: wholeExact && lastExact }));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  Deno.exit(0);
}
if (Deno.args[0] === "store") {
  // FileStore writes of sizes that end inside a block, a new file and one recycling a larger one.
  try {
    const store = new FileStore(dir);
    const pattern = (n: number, k: number) => new Uint8Array(n).map((_, i) => (i * 131 + k) & 255);
    const write = async (key: string, chunks: Uint8Array[], reuse?: string) => {
      const w = await store.writer(key, reuse ? { reuse } : {});
      for (const c of chunks) await w.write(c);
      return (await w.close()).size;
    };
    const same = async (key: string, chunks: Uint8Array[]) => {
      const file = await Deno.readFile(`${dir}/${key}`);
      let at = 0;
      for (const c of chunks) {
        if (!c.every((b, i) => file[at + i] === b)) return false;
        at += c.byteLength;
      }
      return at === file.byteLength;
    };
    const big = [pattern(9 * 2 ** 20 + 3, 1), pattern(3 * 2 ** 20, 2), pattern(4097, 3)];
    const small = [pattern(2 * 2 ** 20 + 5, 4)];
    const sizes = [await write("big.bin", big)];
    const exact = [await same("big.bin", big)];
    sizes.push(await write("small.bin", small, "big.bin"));
    exact.push(await same("small.bin", small));
    const noAddress = new FileStore(dir, { directWrites: false }).address === undefined;
    console.log(JSON.stringify({ sizes, exact, noAddress }));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
  Deno.exit(0);
}
try {
  const path = `${dir}/f.bin`;
  await Deno.writeFile(path, new Uint8Array(0));
  const missing = openDirect(`${dir}/missing.bin`) !== undefined;
  const d = openDirect(path);
  if (!d) {
    console.log(JSON.stringify({ opened: false, missing }));
  } else {
    // 4 MiB in 2 MiB pages: a buffer that starts on a block boundary, where FFI is granted.
    const buffer = freshBuffer(4 * 2 ** 20).subarray(0, 3 * DIRECT_ALIGN);
    buffer.forEach((_, i) => (buffer[i] = (i * 7) & 255));
    const accepts = [d.accepts(buffer), d.accepts(buffer.subarray(1))];
    const writes = [
      await d.write(buffer.subarray(0, 2 * DIRECT_ALIGN), DIRECT_ALIGN), // aligned: taken
      await d.write(buffer.subarray(0, 100), 0), // a partial block: refused
      await d.write(buffer.subarray(0, DIRECT_ALIGN), 100), // an unaligned offset: refused
    ];
    d.close();
    d.close(); // twice is harmless
    writes.push(await d.write(buffer.subarray(0, DIRECT_ALIGN), 0)); // after close: refused
    const file = await Deno.readFile(path);
    const exact = file.byteLength === 3 * DIRECT_ALIGN && file.subarray(0, DIRECT_ALIGN).every((b) => b === 0) &&
      file.subarray(DIRECT_ALIGN).every((b, i) => b === buffer[i]);
    console.log(JSON.stringify({ opened: true, missing, accepts, writes, exact }));
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}
