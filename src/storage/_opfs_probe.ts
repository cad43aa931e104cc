// What an engine's OPFS can do, asked once per realm of a probe file made for the question and
// removed after: asking the file a save writes could spoil it (WebKitGTK leaves a file whose
// createSyncAccessHandle() failed unwritable by createWritable() too).

/** The parts of a directory handle a probe uses. */
export interface ProbeDir<F> {
  getFileHandle(name: string, options?: { create?: boolean }): Promise<F>;
  removeEntry(name: string): Promise<void>;
}

/**
 * `ask`'s answer about a fresh file of `dir` (`probe-<uuid>`), removed after whatever the
 * answer; what `ask` or the file's creation throws rejects.
 */
export async function probeFile<F, T>(dir: ProbeDir<F>, ask: (file: F) => Promise<T>): Promise<T> {
  const name = `probe-${crypto.randomUUID()}`;
  try {
    return await ask(await dir.getFileHandle(name, { create: true }));
  } finally {
    await dir.removeEntry(name).catch(() => {});
  }
}
