// Child process for tests/format/amplification_test.ts: builds one hostile input, resets the peak
// RSS, decodes it with the caps given as JSON, and prints {baseRss, peakRss, error} as JSON.
import { createHash } from "node:crypto";
import { decodeCheckpoint } from "../../mod.ts";
import { encodeHeader, encodeRecordPrefix, RecordKind } from "../../src/format/codecs/binary.ts";

const [op = "", capsJson = "{}"] = Deno.args;
const utf8 = new TextEncoder();

function status(field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(Deno.readTextFileSync("/proc/self/status"));
  return Number(m![1]) * 1024;
}

/** A binary stream whose one tensor declares a 256 MiB body of zeros, gzip-compressed (about 256 KiB). */
async function gzipBody(): Promise<Uint8Array> {
  const prefix: Uint8Array[] = [encodeHeader()];
  const meta = utf8.encode('{"step":1}');
  const h = createHash("sha256");
  const mp = encodeRecordPrefix(RecordKind.metadata, meta, 0, 16);
  h.update(mp);
  prefix.push(mp, h.digest());
  const at = 16 + mp.byteLength + 32;
  prefix.push(
    encodeRecordPrefix(
      RecordKind.tensor,
      utf8.encode('{"name":"w","dtype":"uint8","shape":[268435456],"group":"params"}'),
      2 ** 28,
      at,
    ),
  );
  const zeros = new Uint8Array(2 ** 20);
  const body = ReadableStream.from((function* () {
    yield* prefix;
    for (let i = 0; i < 256; i++) yield zeros;
  })());
  return new Uint8Array(
    await new Response(body.pipeThrough(new CompressionStream("gzip") as ReadableWritablePair<Uint8Array, Uint8Array>))
      .arrayBuffer(),
  );
}

/** A JSON checkpoint whose uint8 tensor of `n` elements has one element per data line. */
function jsonLines(n: number): Uint8Array {
  const lines: string[] = ['{"ckpt":"jsonl","version":1}'];
  const stream = createHash("sha256");
  const add = (line: string, record?: ReturnType<typeof createHash>) => {
    lines.push(line);
    stream.update(line + "\n");
    record?.update(line + "\n");
  };
  stream.update(lines[0] + "\n");
  let r = createHash("sha256");
  add('{"metadata":{"step":1}}', r);
  add(`{"sha256":"${r.digest("hex")}"}`);
  r = createHash("sha256");
  add(`{"tensor":{"name":"w","dtype":"uint8","shape":[${n}],"group":"params"}}`, r);
  for (let i = 0; i < n; i++) add(`{"data":[${i % 251}]}`, r);
  add(`{"sha256":"${r.digest("hex")}"}`);
  lines.push(`{"end":{"tensors":1,"sha256":"${stream.digest("hex")}"}}`);
  return utf8.encode(lines.join("\n") + "\n");
}

const input = op === "gzip-body" ? await gzipBody() : jsonLines(Number(op.split(":")[1]));
Deno.writeTextFileSync("/proc/self/clear_refs", "5"); // reset VmHWM to the current RSS
const baseRss = status("VmRSS");
let error: string | undefined;
let elements = 0;
try {
  for await (const r of decodeCheckpoint(input, JSON.parse(capsJson))) {
    if (r.type === "tensor") elements += r.tensor.data.length;
  }
} catch (e) {
  error = `${(e as Error).name}: ${(e as Error).message}`;
}
console.log(JSON.stringify({ inputBytes: input.byteLength, baseRss, peakRss: status("VmHWM"), error, elements }));
