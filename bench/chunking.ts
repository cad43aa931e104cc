// Decode time per MiB against the size of the chunks the bytes arrive in (network bodies, pipes
// and object stores deliver small, uneven chunks). For each codec and chunk size the script
// decodes two inputs, one four times the other, and prints the time per MiB of each and their
// ratio: a reader that is linear in the bytes received gives a ratio near 1 whatever the chunk
// size (a quadratic one gives about 4). Absolute times across chunk sizes differ by the fixed
// cost of each chunk passing through the streams, which the last column shows.
//
//   deno task bench:chunking            (about a minute on an idle machine)
import { decodeCheckpoint, encodeCheckpoint, type TensorInput } from "../mod.ts";
import { safetensorsCodec } from "../src/interop/safetensors.ts";
import type { Codec } from "../src/format/codec.ts";

const KiB = 1024;
const MiB = 2 ** 20;

/** A checkpoint of about `bytes` in the given codec. */
async function sample(codec: "binary" | "json" | "safetensors", bytes: number): Promise<Uint8Array> {
  let tensors: TensorInput[];
  if (codec === "safetensors") {
    // Header-heavy: many one-element tensors, so the JSON header is most of the file.
    const n = Math.max(1, Math.round(bytes / 90));
    tensors = Array.from({ length: n }, (_, i) => ({
      name: `layer${i}/kernel`,
      dtype: "float32",
      shape: [1],
      data: new Float32Array([i]),
    }));
  } else {
    const n = codec === "json" ? Math.round(bytes / 20) : Math.round(bytes / 4);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = Math.fround(Math.sin(i) * 0.01);
    tensors = [{ name: "w", dtype: "float32", shape: [n], data }];
  }
  const c = codec === "safetensors" ? safetensorsCodec : codec;
  return new Uint8Array(
    await new Response(encodeCheckpoint({ metadata: { step: 1 }, tensors }, { codec: c }))
      .arrayBuffer(),
  );
}

function chunked(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  let at = 0;
  return new ReadableStream({
    pull(c) {
      if (at >= bytes.byteLength) return c.close();
      c.enqueue(bytes.subarray(at, at + size));
      at += size;
    },
  }, { highWaterMark: 0 });
}

async function decodeMs(bytes: Uint8Array, size: number, codecs: Codec[]): Promise<number> {
  const t0 = performance.now();
  for await (const _ of decodeCheckpoint(chunked(bytes, size), { codecs })) { /* consume */ }
  return performance.now() - t0;
}

const CHUNKS: [string, number, number][] = [
  // label, chunk size, smaller input (the larger is 4x)
  ["1 B", 1, 32 * KiB],
  ["16 B", 16, 256 * KiB],
  ["1 KiB", KiB, 2 * MiB],
  ["16 KiB", 16 * KiB, 4 * MiB],
  ["1 MiB", MiB, 8 * MiB],
];

const CODECS =
  (Deno.args.length ? Deno.args : ["binary", "json", "safetensors"]) as ("binary" | "json" | "safetensors")[];
console.log("codec        chunk    small MiB  ms/MiB   large MiB  ms/MiB   large/small  µs/chunk");
for (const codec of CODECS) {
  const codecs = codec === "safetensors" ? [safetensorsCodec] : [];
  for (const [label, size, given] of CHUNKS) {
    // A safetensors header may not exceed maxHeaderBytes (16 MiB).
    const small = codec === "safetensors" ? Math.min(given, 3 * MiB) : given;
    const a = await sample(codec, small);
    const b = await sample(codec, small * 4);
    await decodeMs(a, size, codecs); // warm up
    // Best of three, interleaved, so a busy machine's pauses do not pass for the reader's cost.
    let ta = Infinity, tb = Infinity;
    for (let i = 0; i < 3; i++) {
      ta = Math.min(ta, await decodeMs(a, size, codecs));
      tb = Math.min(tb, await decodeMs(b, size, codecs));
    }
    const perA = ta / (a.byteLength / MiB);
    const perB = tb / (b.byteLength / MiB);
    console.log(
      `${codec.padEnd(12)} ${label.padEnd(8)} ${(a.byteLength / MiB).toFixed(2).padStart(9)}  ${
        perA.toFixed(1).padStart(7)
      }  ${(b.byteLength / MiB).toFixed(2).padStart(9)}  ${perB.toFixed(1).padStart(7)}  ${
        (perB / perA).toFixed(2).padStart(11)
      }  ${(tb * 1000 / Math.ceil(b.byteLength / size)).toFixed(2).padStart(8)}`,
    );
  }
}
