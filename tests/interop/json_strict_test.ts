// The strict JSON parser behind safetensors headers, against hostile literals.
import assert from "node:assert/strict";
import { decodeSafetensorsHeader } from "../../src/interop/safetensors.ts";
import { MAX_NUMBER_CHARS, parseStrictJson } from "../../src/interop/_json_strict.ts";

const utf8 = new TextEncoder();
const fail = (why: string, at: number): never => {
  throw new SyntaxError(`${why} at offset ${at}`);
};

Deno.test("strict JSON rejects a number literal of a million digits with a SyntaxError, not a stack overflow", () => {
  for (const literal of ["1".repeat(1e6), "-" + "9".repeat(1e6), "1." + "0".repeat(1e6), "1e" + "5".repeat(1e6)]) {
    const header = utf8.encode(`{"w":{"dtype":"F32","shape":[${literal}],"data_offsets":[0,4]}}`);
    assert.throws(() => decodeSafetensorsHeader(header), (e) => {
      assert.ok(e instanceof SyntaxError, String(e));
      assert.match((e as Error).message, /number literal of \d+ characters is longer than 64 at offset 37$/);
      assert.ok((e as Error).message.length < 200);
      return true;
    });
  }
});

Deno.test("strict JSON keeps integer literals up to its length cap exact", () => {
  const big = "1" + "0".repeat(MAX_NUMBER_CHARS - 1);
  assert.equal(parseStrictJson(utf8.encode(`[${big}]`), 0, fail)?.toString(), BigInt(big).toString());
  assert.throws(() => parseStrictJson(utf8.encode(`[${big}0]`), 0, fail), SyntaxError);
});

Deno.test("strict JSON reads -0 as the number -0, not the integer 0 (serde_json reads a float too)", () => {
  const [minusZero, zero, minusOne] = parseStrictJson(utf8.encode("[-0, 0, -1]"), 0, fail) as unknown[];
  assert.ok(Object.is(minusZero, -0));
  assert.equal(zero, 0n);
  assert.equal(minusOne, -1n);
});
