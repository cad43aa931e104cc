// A strict JSON parser over bytes, for headers from untrusted files. Unlike JSON.parse it
// refuses duplicate object keys, keeps integer literals exact (as bigint, so a u64 offset is
// never silently rounded), caps nesting depth, and reports byte offsets. Objects become Maps so
// that names such as "__proto__" are plain data.

/** A parsed JSON value: integer literals as bigint (but `-0` as the number -0), other numbers as number, objects as Map. */
export type StrictJson = null | boolean | number | bigint | string | StrictJson[] | Map<string, StrictJson>;

/** Deepest nesting accepted. */
export const MAX_JSON_DEPTH = 64;
/** Longest number literal accepted, in characters (a u64 needs 20). */
export const MAX_NUMBER_CHARS = 64;

const WS = new Set([0x20, 0x09, 0x0a, 0x0d]);
const utf8Strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const ascii = new TextDecoder("latin1");

/**
 * Parses `bytes` (already checked to be UTF-8) as one JSON value followed only by JSON
 * whitespace. `base` is the file offset of `bytes[0]`, used in messages; `fail` builds the error.
 */
export function parseStrictJson(
  bytes: Uint8Array,
  base: number,
  fail: (why: string, offset: number) => never,
): StrictJson {
  let i = 0;
  const skip = (): void => {
    while (i < bytes.length && WS.has(bytes[i]!)) i++;
  };
  const expect = (what: string): never =>
    fail(
      i < bytes.length
        ? `expected ${what}, found ${JSON.stringify(String.fromCharCode(bytes[i]!))}`
        : `expected ${what}, found the end of the header`,
      base + i,
    );

  const literal = (word: string, value: StrictJson): StrictJson => {
    for (let k = 0; k < word.length; k++) {
      if (bytes[i + k] !== word.charCodeAt(k)) expect("a JSON value");
    }
    i += word.length;
    return value;
  };

  const string = (): string => {
    const start = i;
    i++; // opening quote
    for (;;) {
      if (i >= bytes.length) fail("unterminated string", base + start);
      const b = bytes[i]!;
      if (b === 0x22) break;
      if (b === 0x5c) i++;
      else if (b < 0x20) fail("control character in string", base + i);
      i++;
    }
    i++; // closing quote
    try {
      return JSON.parse(utf8Strict.decode(bytes.subarray(start, i))) as string;
    } catch (e) {
      return fail(`invalid string (${(e as Error).message})`, base + start);
    }
  };

  const number = (): number | bigint => {
    const start = i;
    if (bytes[i] === 0x2d) i++;
    const digits = (): number => {
      const from = i;
      while (i < bytes.length && bytes[i]! >= 0x30 && bytes[i]! <= 0x39) i++;
      return i - from;
    };
    const intStart = i;
    const n = digits();
    if (n === 0) expect("a digit");
    if (n > 1 && bytes[intStart] === 0x30) fail("number with a leading zero", base + intStart);
    let integer = true;
    if (bytes[i] === 0x2e) {
      i++;
      integer = false;
      if (digits() === 0) expect("a digit after the decimal point");
    }
    if (bytes[i] === 0x65 || bytes[i] === 0x45) {
      i++;
      integer = false;
      if (bytes[i] === 0x2b || bytes[i] === 0x2d) i++;
      if (digits() === 0) expect("a digit in the exponent");
    }
    if (i - start > MAX_NUMBER_CHARS) {
      fail(`number literal of ${i - start} characters is longer than ${MAX_NUMBER_CHARS}`, base + start);
    }
    const text = ascii.decode(bytes.subarray(start, i));
    // "-0" is not an integer a reader can take (serde_json reads it as the float -0.0, which the
    // reference refuses for a size or an offset), so it stays a number, never 0n.
    if (integer && text !== "-0") return BigInt(text);
    return Number(text);
  };

  const value = (depth: number): StrictJson => {
    if (depth > MAX_JSON_DEPTH) fail(`JSON nests deeper than ${MAX_JSON_DEPTH} levels`, base + i);
    skip();
    const b = bytes[i];
    if (b === 0x7b) {
      const at = i;
      i++;
      const map = new Map<string, StrictJson>();
      skip();
      if (bytes[i] === 0x7d) {
        i++;
        return map;
      }
      for (;;) {
        skip();
        if (bytes[i] !== 0x22) expect("a string key");
        const keyAt = i;
        const key = string();
        if (map.has(key)) {
          fail(`duplicate key ${JSON.stringify(key)} in the object at offset ${base + at}`, base + keyAt);
        }
        skip();
        if (bytes[i] !== 0x3a) expect('":"');
        i++;
        map.set(key, value(depth + 1));
        skip();
        if (bytes[i] === 0x2c) {
          i++;
          continue;
        }
        if (bytes[i] === 0x7d) {
          i++;
          return map;
        }
        expect('"," or "}"');
      }
    }
    if (b === 0x5b) {
      i++;
      const list: StrictJson[] = [];
      skip();
      if (bytes[i] === 0x5d) {
        i++;
        return list;
      }
      for (;;) {
        list.push(value(depth + 1));
        skip();
        if (bytes[i] === 0x2c) {
          i++;
          continue;
        }
        if (bytes[i] === 0x5d) {
          i++;
          return list;
        }
        expect('"," or "]"');
      }
    }
    if (b === 0x22) return string();
    if (b === 0x74) return literal("true", true);
    if (b === 0x66) return literal("false", false);
    if (b === 0x6e) return literal("null", null);
    if (b === 0x2d || (b !== undefined && b >= 0x30 && b <= 0x39)) return number();
    return expect("a JSON value");
  };

  const result = value(0);
  skip();
  if (i < bytes.length) fail("unexpected bytes after the JSON value (only whitespace may pad the header)", base + i);
  return result;
}
