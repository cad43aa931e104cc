// File names of checkpoints from a pattern such as "step-{step:9}.ckpt": `{step}` is the step in
// decimal, `{step:N}` the step zero-padded to at least N digits. The pattern must name a plain file
// in the directory and must not collide with the manager's own files.

/** Names the manager keeps for itself inside a checkpoint directory. */
export const RESERVED_FILES: ReadonlySet<string> = new Set(["index.json", "ckpt.lock", "blobs"]);

/** The suffix added to a checkpoint's file name for an incremental checkpoint's manifest. */
export const MANIFEST_SUFFIX = ".manifest.json";

/** A compiled filename pattern. */
export interface FilenamePattern {
  /** The pattern as given. */
  readonly source: string;
  /** What every name starts with (the part before `{step}`). */
  readonly prefix: string;
  /** The file name for a step. */
  format(step: number): string;
  /** The step a file name stands for, or `undefined` when the name does not match exactly. */
  parse(name: string): number | undefined;
  /**
   * The name of one save of a step on an object store: the step followed by `.` and a random
   * token (`step-000000100.1f2e3d4c5b6a.ckpt`), so that no two saves ever write the same key.
   */
  formatUnique(step: number, token: string): string;
  /** The step of a name made by `formatUnique`, or `undefined` when the name is not one. */
  parseUnique(name: string): number | undefined;
}

/** A fresh token for {@linkcode FilenamePattern.formatUnique}: 12 hex digits. */
export function saveToken(): string {
  return crypto.randomUUID().replaceAll("-", "").slice(0, 12);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Checks a pattern and compiles it; a `TypeError` says what is wrong with it. */
export function compilePattern(pattern: string): FilenamePattern {
  const bad = (why: string): never => {
    throw new TypeError(`Invalid filename pattern ${JSON.stringify(pattern)}: ${why}`);
  };
  if (typeof pattern !== "string") throw new TypeError("Invalid filename pattern: expected a string");
  const m = /^([^{}]*)\{step(?::(\d{1,2}))?\}([^{}]*)$/.exec(pattern);
  if (!m) bad("it must contain {step} or {step:N} exactly once and no other braces");
  const [, before = "", widthText, after = ""] = m!;
  const width = widthText === undefined ? 0 : Number(widthText);
  if (width > 20) bad("the padding width must be at most 20");
  if (/[/\\\0]/.test(pattern)) bad("it must name a file inside the directory (no path separators)");
  if (pattern.startsWith(".")) bad("names starting with '.' are reserved for temporary files");
  if (after.endsWith(MANIFEST_SUFFIX)) bad(`names ending in ${MANIFEST_SUFFIX} are reserved for manifests`);
  const re = new RegExp(`^${escapeRegExp(before)}(\\d+)${escapeRegExp(after)}$`);
  const unique = new RegExp(`^${escapeRegExp(before)}(\\d+)\\.([0-9a-f]{12})${escapeRegExp(after)}$`);
  const format = (step: number): string => `${before}${String(step).padStart(width, "0")}${after}`;
  for (const step of [0, 1, 12345]) {
    if (RESERVED_FILES.has(format(step))) bad(`it gives the reserved name ${format(step)}`);
  }
  return {
    source: pattern,
    prefix: before,
    format,
    parse(name: string): number | undefined {
      const hit = re.exec(name);
      if (!hit) return undefined;
      const step = Number(hit[1]);
      return Number.isSafeInteger(step) && format(step) === name ? step : undefined;
    },
    formatUnique: (step: number, token: string): string =>
      `${before}${String(step).padStart(width, "0")}.${token}${after}`,
    parseUnique(name: string): number | undefined {
      const hit = unique.exec(name);
      if (!hit) return undefined;
      const step = Number(hit[1]);
      return Number.isSafeInteger(step) && format(step) === `${before}${hit[1]}${after}` ? step : undefined;
    },
  };
}

/** Whether a name is a temporary file left by `writeFileAtomic` (`.NAME.tmp-PID-XXXXXXXX`). */
export function isTemporaryName(name: string): boolean {
  return /^\..+\.tmp-\d+-[0-9a-f]{8}$/.test(name);
}
