// What the BackgroundWriter and its worker say to each other, how errors cross between them,
// and the promise type that knows whether a caller is listening.

import type { Metadata, TensorInput } from "../format/types.ts";
import { type OsErrorKind, OsErrors } from "../runtime/errors.ts";
import type { SaveResult } from "../io/save.ts";

/** The save options that can cross to a worker (a Codec object cannot: it holds functions). */
export interface WorkerSaveOptions {
  codec: "binary" | "json";
  compression: "none" | "gzip" | "bytegroup";
  sync: boolean;
  sha256sum: boolean;
  reuse?: string;
}

/** Main thread to worker: save one checkpoint; the tensors' buffers are transferred. */
export interface SaveRequest {
  id: number;
  /** Where to write: a path or an address (`opfs:///dir/a.ckpt`); messages name the save by it. */
  path: string;
  /**
   * For a `{ store, key }` target: the store's address, which the worker opens with
   * `resolveDirectory`, and the key to write there (the store makes the directories a key needs,
   * which writing to `path` would not).
   */
  object?: { store: string; key: string };
  metadata: Metadata;
  tensors: TensorInput[];
  /** Per tensor, the bytes in front of its data free for its record prefix (`takeOwnership`'s). */
  headroom?: number[];
  /**
   * The tensors come after this request, in {@linkcode TensorChunk} messages with its `id`, as they
   * are read out of the model (`tensors` is then empty): the worker encodes and writes the first
   * while the later ones are still being copied. Only with `whenBusy` `"wait"`.
   */
  stream?: boolean;
  options: WorkerSaveOptions;
  /** What to do with this request if another is still waiting when it arrives. */
  whenBusy: "wait" | "coalesce";
}

/** Main thread to worker: more tensors of a streamed save (`chunk` is its request's id), or its end. */
export interface TensorChunk {
  chunk: number;
  tensors: TensorInput[];
  /** As {@linkcode SaveRequest.headroom}, for these tensors. */
  headroom?: number[];
  /** No tensors follow; with `error`, the save fails with it (the file is not written). */
  end?: boolean;
  error?: SerializedError;
}

/**
 * Main thread to worker, first of all: how the worker sets itself up. `nice`: lower its thread's
 * scheduling priority to that nice value (see src/runtime/_thread_priority.ts); absent, it is left.
 */
export interface WorkerSetup {
  setup: { nice?: number };
}

/** An error as it crosses the thread boundary. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
}

/** Worker to main thread: the outcome, with the tensors (their buffers transferred back). */
export type SaveReply =
  & { id: number; tensors: TensorInput[] }
  & (
    | { status: "saved"; result: SaveResult }
    | { status: "failed"; error: SerializedError }
    | { status: "superseded"; by: { step: number; path: string } }
  );

/**
 * A key of the BackgroundWriter options, kept out of the public types: the URL of the worker
 * module to run instead of the bundled one. Tests use it to run a worker that crashes.
 */
export const WORKER_URL: unique symbol = Symbol("ckpt.BackgroundWriter.workerUrl");

/**
 * The key of a BackgroundWriter's streamed save, kept out of the public API: `CheckpointWriter`
 * hands it a snapshot's tensors as they are read out of the model.
 */
export const SAVE_STREAM: unique symbol = Symbol("ckpt.BackgroundWriter.saveStream");

/** An error, reduced to what survives a `postMessage`. */
export function serializeError(e: unknown): SerializedError {
  if (e instanceof Error) {
    return { name: e.name, message: e.message, ...(e.stack === undefined ? {} : { stack: e.stack }) };
  }
  return { name: "Error", message: String(e) };
}

type ErrorClass = new (message: string, options?: ErrorOptions) => Error;

const BUILTIN_ERRORS: Readonly<Record<string, ErrorClass>> = {
  TypeError,
  RangeError,
  SyntaxError,
};

function errorClass(name: string): ErrorClass {
  if (Object.hasOwn(BUILTIN_ERRORS, name)) return BUILTIN_ERRORS[name]!;
  // The OS's errors (NotFound, PermissionDenied...) keep their class so callers can test
  // `instanceof OsErrors.NotFound` (Deno.errors.NotFound in Deno). DOMExceptions such as OPFS's
  // QuotaExceededError keep their name in the message: see rebuildError.
  if (Object.hasOwn(OsErrors, name)) return OsErrors[name as OsErrorKind];
  return Error;
}

/**
 * The error a failed background save reports: the class of the worker's error, a message that
 * says which save failed (`context`), and the worker's own error as `cause`.
 */
export function rebuildError(e: SerializedError, context: string): Error {
  const Class = errorClass(e.name);
  // A class this side lacks (a DOMException such as OPFS's TypeMismatchError or
  // QuotaExceededError, a class of the worker's own) keeps its name, on the cause and in the
  // message: the DOM's messages rarely say what went wrong without it.
  const named = Class === Error && e.name !== "Error" ? e.name : undefined;
  const cause = new Class(e.message);
  if (named) cause.name = named;
  if (e.stack !== undefined) cause.stack = e.stack;
  return new Class(`${context}: ${named ? `${named}: ` : ""}${e.message}`, { cause });
}

/**
 * A promise that records whether anyone took charge of its failure: a failure nobody took charge
 * of is then reported by the writer's next call. Taking charge means attaching a rejection
 * handler to this promise or to a promise that `then(onFulfilled)` or `finally` derived from it:
 * `await`, `catch`, the second argument of `then`, `Promise.all` and friends. What the handler
 * does is its own business: `.catch(() => {})` silences a failure on purpose. `then(onSaved)`
 * alone does not take charge, so `save(...).then(log)` leaves failures to the writer.
 *
 * It is created already marked as handled, so a failure nobody listens to never becomes an
 * unhandled-rejection crash; a derived promise is marked the same way for that failure (an error
 * thrown by `onFulfilled` itself is an ordinary rejection).
 */
export class SavePromise<T> extends Promise<T> {
  static override get [Symbol.species](): PromiseConstructor {
    return Promise;
  }

  #observed = false;
  #parent: SavePromise<unknown> | undefined;

  /** Whether a rejection handler was attached, here or on a promise derived from this one. */
  get observed(): boolean {
    return this.#observed;
  }

  #observe(): void {
    this.#observed = true;
    if (this.#parent) this.#parent.#observe();
  }

  override then<A = T, B = never>(
    onFulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    if (typeof onRejected === "function") {
      this.#observe();
      return super.then(onFulfilled, onRejected);
    }
    return this.#derive<A | B>((value, resolve) => {
      resolve(typeof onFulfilled === "function" ? onFulfilled(value) : value as unknown as A);
    });
  }

  override finally(onFinally?: (() => void) | null): Promise<T> {
    if (typeof onFinally !== "function") return this.then();
    return this.#derive((value, resolve, reject) => {
      Promise.resolve(onFinally()).then(() => resolve(value), reject);
    }, onFinally);
  }

  /**
   * A promise linked to this one: it settles through `onValue` when this one is fulfilled and
   * fails with this one's failure (after `onFailure`), which stays unreported until a rejection
   * handler is attached to it.
   */
  #derive<A>(
    onValue: (value: T, resolve: (v: A | PromiseLike<A>) => void, reject: (e: unknown) => void) => void,
    onFailure?: () => unknown,
  ): SavePromise<A> {
    const derived = new SavePromise<A>((resolve, reject) => {
      Promise.prototype.then.call(this, (value) => {
        try {
          onValue(value as T, resolve, reject);
        } catch (e) {
          reject(e);
        }
      }, async (error: unknown) => {
        try {
          if (onFailure) await onFailure();
        } catch (e) {
          reject(e); // the callback's own error replaces the save's failure, as with `finally`
          return;
        }
        Promise.prototype.then.call(derived, undefined, () => {}); // the save's failure: the writer's to report
        reject(error);
      });
    });
    derived.#parent = this as SavePromise<unknown>;
    return derived;
  }

  /** A pending promise with its settle functions. */
  static create<T>(): { promise: SavePromise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new SavePromise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    // Mark as handled without counting as an observer.
    Promise.prototype.then.call(promise, undefined, () => {});
    return { promise, resolve, reject };
  }
}
