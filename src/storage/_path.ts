// A filesystem path from a string or a file: URL; other URL schemes are refused.
import { fileURLToPath } from "node:url";

export function toPath(target: string | URL, verb = "use"): string {
  if (target instanceof URL) {
    if (target.protocol !== "file:") {
      throw new TypeError(`Cannot ${verb} ${target.href}: only file: URLs are supported`);
    }
    return fileURLToPath(target);
  }
  return target;
}
