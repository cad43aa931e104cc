/**
 * "a" or "an" before a word that an error message computes (a type name, a dtype, a size), by
 * how it is said: "an Int32Array", "an int64", "an 8-byte", "an 11-byte", but "a Uint8Array"
 * ("you-int") and "a 16-byte".
 *
 * @module
 */

/**
 * `word` with the indefinite article it is said with.
 *
 * @example
 * ```ts
 * import { withArticle } from "./_article.ts";
 * import assert from "node:assert/strict";
 * assert.equal(withArticle("Int32Array"), "an Int32Array");
 * assert.equal(withArticle("Uint8Array"), "a Uint8Array");
 * assert.equal(withArticle("18-byte"), "an 18-byte");
 * ```
 */
export function withArticle(word: string): string {
  const digits = /^\d+/.exec(word)?.[0];
  // 8, 80-89, 800...; and 11 and 18, alone or as thousands, millions (said "eleven", "eighteen").
  const an = digits !== undefined
    ? digits.startsWith("8") || (digits.length % 3 === 2 && /^1[18]/.test(digits))
    : /^[aeio]/i.test(word);
  return `${an ? "an" : "a"} ${word}`;
}
