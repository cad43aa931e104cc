// Raw deflate (RFC 1951) for byte-grouped tensor bodies. Planes are written by
// `_deflate_literals.ts` in every runtime (Huffman coding only: an exponent plane has little for a
// match search to find), so a page, Node and Deno write the same bytes. Streams of literals only,
// which is all a Huffman-only deflate writes, whoever wrote it, are inflated by
// `_inflate_literals.ts` (several bytes per table lookup, into a buffer the caller reuses); any
// other stream by the runtime's inflater, chosen here: `node:zlib` where it exists (Deno, Node),
// else the standard `DecompressionStream("deflate-raw")` (a browser).

import { inflateLiterals } from "./_inflate_literals.ts";
import { iterate, readableFrom } from "./_streams.ts";

type Zlib = typeof import("node:zlib");
type Pair = ReadableWritablePair<Uint8Array, Uint8Array>;

let zlib: Promise<Zlib | undefined> | undefined;

/** Deno or Node: runtimes with `node:zlib` (a browser is not even asked, so its console stays quiet). */
function isServerRuntime(): boolean {
  const g = globalThis as { Deno?: { version?: { deno?: unknown } }; process?: { versions?: { node?: unknown } } };
  return typeof g.Deno?.version?.deno === "string" || typeof g.process?.versions?.node === "string";
}

/** `node:zlib` where the runtime has it, else `undefined` (loaded once, lazily). */
function nodeZlib(): Promise<Zlib | undefined> {
  // A specifier in a variable keeps browser bundlers from trying to resolve it.
  const specifier = "node:zlib";
  return zlib ??= isServerRuntime()
    ? import(specifier).then((m: Zlib) => m, () => undefined)
    : Promise.resolve(undefined);
}

/** Which general inflater {@linkcode inflateRaw} falls back to: `node:zlib` by default where it exists. */
export type DeflateBackend = "node:zlib" | "web";

/**
 * Inflates raw deflate `bytes` that must decode to exactly `size` bytes (size ≥ 1): more or fewer,
 * or malformed or truncated input, is a `SyntaxError` whose message starts with `why` (the caller's
 * subject, such as `tensor "w" plane 3`) and names `offset`. Never allocates more than `size` bytes
 * of output, whatever the input claims.
 *
 * A stream of literals only, as every Huffman-only deflate is, is decoded in JavaScript
 * ({@linkcode inflateLiterals}: several bytes per table lookup; 14 against 26 ms per 32 MiB load here)
 * into `into` when given (exactly `size` bytes, such as a buffer reused from plane to plane), else
 * into a new buffer; any other stream (matches, or malformed) goes to the backend's inflater, which
 * returns a buffer of its own.
 */
export async function inflateRaw(
  bytes: Uint8Array,
  size: number,
  why: string,
  offset: number,
  backend?: DeflateBackend,
  into?: Uint8Array,
): Promise<Uint8Array> {
  const bad = (what: string): never => {
    throw new SyntaxError(`Cannot decode checkpoint: ${why} ${what} at offset ${offset}`);
  };
  if (into !== undefined && into.byteLength !== size) {
    throw new RangeError(`inflateRaw: into has ${into.byteLength} bytes, not ${size}`);
  }
  const fast = into ?? new Uint8Array(size);
  if (inflateLiterals(bytes, fast)) return fast;
  const z = backend === "web" ? undefined : await nodeZlib();
  if (z) {
    let out: Uint8Array;
    try {
      // One output chunk of the expected size: no joining of 16 KiB pieces.
      out = z.inflateRawSync(bytes, { maxOutputLength: size, chunkSize: Math.max(64, size) });
    } catch (e) {
      if ((e as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") bad(`inflates to more than ${size} bytes`);
      bad(`is not valid deflate data (${(e as Error).message})`);
    }
    if (out!.byteLength !== size) bad(`inflates to ${out!.byteLength} bytes, not ${size}`);
    return plain(out!);
  }
  const out = new Uint8Array(size);
  let have = 0;
  try {
    const inflated = readableFrom([bytes]).pipeThrough(new DecompressionStream("deflate-raw") as Pair);
    for await (const chunk of iterate(inflated)) {
      if (have + chunk.byteLength > size) bad(`inflates to more than ${size} bytes`);
      out.set(chunk, have);
      have += chunk.byteLength;
    }
  } catch (e) {
    if (e instanceof SyntaxError) throw e;
    bad(`is not valid deflate data (${(e as Error).message})`);
  }
  if (have !== size) bad(`inflates to ${have} bytes, not ${size}`);
  return out;
}

/** A Node Buffer as a plain Uint8Array view (the same bytes, the type every caller compares). */
function plain(b: Uint8Array): Uint8Array {
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}
