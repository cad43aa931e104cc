// Deno has no page: these put Deno's own WebCrypto (the same API, copying its input) in the place
// of a page's, with no native thread, and count what it was given.
import { setNativeDigestForTests, setWebDigestForTests } from "../../../src/format/_hash.ts";

/** Installs Deno's WebCrypto as the page's, with no native thread; returns the sizes it was given. */
export function spyWeb(): number[] {
  const calls: number[] = [];
  setNativeDigestForTests(null);
  setWebDigestForTests(async (bytes) => {
    calls.push(bytes.byteLength);
    return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>));
  });
  return calls;
}

/** Back to the runtime's own digests. */
export function restore(): void {
  setWebDigestForTests("restore");
  setNativeDigestForTests("restore");
}
