/// <reference lib="dom" />
/// <reference lib="dom.iterable" />
// The browser demo: trains a small TF.js model in the page, checkpoints it into the Origin Private
// File System from a Web Worker while training goes on, resumes from the newest checkpoint after a reload, lists
// the checkpoints, downloads one, and verifies a checkpoint file dropped onto the page.
// Built and served by `deno task web` (demo/web/serve.ts).
import * as tf from "@tensorflow/tfjs";
import { setWasmPaths } from "@tensorflow/tfjs-backend-wasm";
import "@tensorflow/tfjs-backend-webgpu";
import { CheckpointManager, loadCheckpoint } from "../../mod.ts";
import { OpfsStore } from "../../src/storage/opfs.ts";
import { CheckpointWriter, restore } from "../../src/tfjs/mod.ts";
import { spirals } from "../_data.ts";

const params = new URLSearchParams(location.search);
const BACKEND = params.get("backend") ?? localStorage.getItem("ckpt-demo-backend") ?? "cpu";
const STEPS = Number(params.get("steps") ?? 2000);
const EVERY = Number(params.get("every") ?? 25);
const DIR = params.get("dir") ?? "demo/spirals";
const SEED = 7;
const POINTS = 512;

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const show = (id: string, text: string, cls = "") => {
  const el = $(id);
  el.textContent = text;
  el.className = cls;
};

/** What the page shows, also read by the reload test. */
const state = { ready: false, backend: BACKEND, step: 0, resumedFrom: 0, saved: 0, saving: false, error: "" };
(globalThis as { demo?: typeof state }).demo = state;

function spiralTensors(): { x: tf.Tensor2D; y: tf.Tensor2D } {
  const { x, y } = spirals(SEED, POINTS);
  return { x: tf.tensor2d(x, [POINTS, 2]), y: tf.tensor2d(y, [POINTS, 1]) };
}

function buildModel(): { model: tf.LayersModel; optimizer: tf.Optimizer } {
  const init = (n: number) => tf.initializers.glorotUniform({ seed: SEED * 10 + n });
  const model = tf.sequential({
    layers: [
      tf.layers.dense({ name: "hidden1", units: 32, inputShape: [2], activation: "relu", kernelInitializer: init(1) }),
      tf.layers.dense({ name: "hidden2", units: 32, activation: "relu", kernelInitializer: init(2) }),
      tf.layers.dense({ name: "output", units: 1, activation: "sigmoid", kernelInitializer: init(3) }),
    ],
  });
  const optimizer = tf.train.adam(0.01);
  model.compile({ optimizer, loss: "binaryCrossentropy", metrics: ["accuracy"] });
  return { model, optimizer };
}

const fmtBytes = (n: number) => n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`;

async function main(): Promise<void> {
  $<HTMLSelectElement>("backend").value = BACKEND;
  $<HTMLSelectElement>("backend").onchange = (e) => {
    localStorage.setItem("ckpt-demo-backend", (e.target as HTMLSelectElement).value);
    location.search = `?backend=${(e.target as HTMLSelectElement).value}`;
  };
  setWasmPaths("./");
  if (!(await tf.setBackend(BACKEND).catch(() => false))) {
    throw new Error(`the ${BACKEND} backend is not available in this browser`);
  }
  await tf.ready();
  const store = await OpfsStore.open(DIR);
  // Snapshots are taken on this thread; the writer's Web Worker encodes, hashes and writes each
  // file into the same OPFS directory (it opens it itself), and the manager commits and prunes.
  const writer = new CheckpointWriter({ idleTimeout: Infinity });
  const manager = await CheckpointManager.open(store, {
    maxToKeep: 3,
    best: { metric: "loss", mode: "min" },
    writer: writer.fileWriter,
    onWarning: (m) => console.warn(m),
  });
  const { model, optimizer } = buildModel();
  const data = spiralTensors();

  const latest = await manager.latest(); // verified: a damaged newest checkpoint falls back to the one before
  if (latest) {
    await restore(latest, { model, optimizer, strict: false });
    state.step = state.resumedFrom = latest.metadata.step;
    show("status", `resumed from step ${state.step} (verified)`, "ok");
  } else {
    show("status", "fresh start: no checkpoint yet");
  }
  $("step").textContent = String(state.step);

  async function refreshList(): Promise<void> {
    const rows = [];
    for (const e of await manager.list()) {
      const key = e.path.slice(e.path.lastIndexOf("/") + 1);
      const m = e.metadata.metrics ?? {};
      const tr = document.createElement("tr");
      tr.innerHTML = `<td>${e.step}</td><td>${m.loss?.toFixed(4) ?? ""}</td><td>${m.acc?.toFixed(3) ?? ""}</td>` +
        `<td>${fmtBytes(e.bytes)}</td><td>${e.keptBy.join(", ")}</td><td><button>download</button></td>`;
      tr.querySelector("button")!.onclick = async () => {
        const got = await store.get(key);
        const url = URL.createObjectURL(await new Response(got.body).blob());
        const a = Object.assign(document.createElement("a"), { href: url, download: key });
        a.click();
        setTimeout(() => URL.revokeObjectURL(url), 10_000);
      };
      rows.push(tr);
    }
    $("list").replaceChildren(...rows);
  }
  await refreshList();

  let running = false;
  let inFlight: Promise<unknown> | undefined;
  function save(loss: number, acc: number): void {
    if (inFlight) return; // the previous save is still being written: skip this one
    // The snapshot copies the weights now; encoding, hashing and writing run in the worker while
    // training goes on.
    const bar = $<HTMLProgressElement>("progress");
    bar.removeAttribute("value"); // busy, in the worker
    state.saving = true;
    show("saving", `step ${state.step}: writing in a Web Worker…`, "muted");
    inFlight = writer.save(manager, { model, optimizer, step: state.step, metrics: { loss, acc } }).then((entry) => {
      state.saved = entry.step;
      bar.value = 1;
      show("saving", `saved step ${entry.step} (${fmtBytes(entry.bytes)}, sha256 ${entry.sha256.slice(0, 12)}…)`, "ok");
      return refreshList();
    }, (e) => {
      bar.value = 0;
      show("saving", `save failed: ${(e as Error).message}`, "error");
    }).finally(() => {
      inFlight = undefined;
      state.saving = false;
    });
  }

  async function train(): Promise<void> {
    running = true;
    $<HTMLButtonElement>("start").disabled = true;
    $<HTMLButtonElement>("stop").disabled = false;
    localStorage.setItem("ckpt-demo-training", "1");
    show("status", `training on ${tf.getBackend()}`);
    while (running && state.step < STEPS) {
      state.step++;
      const [loss, acc] = (await model.trainOnBatch(data.x, data.y)) as number[];
      $("step").textContent = String(state.step);
      $("loss").textContent = loss!.toFixed(4);
      $("acc").textContent = acc!.toFixed(3);
      if (state.step % EVERY === 0) save(loss!, acc!);
      // Let the page paint, and the worker's replies in (the manager commits a save when its file
      // is written).
      await new Promise((r) => setTimeout(r, 0));
    }
    await inFlight;
    running = false;
    $<HTMLButtonElement>("start").disabled = false;
    $<HTMLButtonElement>("stop").disabled = true;
    show("status", state.step >= STEPS ? `done: ${STEPS} steps` : `paused at step ${state.step}`);
  }

  $("start").onclick = () => void train();
  $("stop").onclick = () => {
    running = false;
    localStorage.removeItem("ckpt-demo-training");
  };
  $("reset").onclick = async () => {
    running = false;
    await inFlight;
    for (const e of (await manager.list()).reverse()) await manager.delete(e.step);
    localStorage.removeItem("ckpt-demo-training");
    location.reload();
  };

  const drop = $("drop");
  drop.ondragover = (e) => {
    e.preventDefault();
    drop.classList.add("over");
  };
  drop.ondragleave = () => drop.classList.remove("over");
  drop.ondrop = async (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const file = e.dataTransfer?.files[0];
    if (file) await inspect(file);
  };

  state.ready = true;
  if (params.get("autostart") === "1" || localStorage.getItem("ckpt-demo-training") === "1") void train();
}

/** Loads a dropped file (verifying every digest) and says what it holds, or what is wrong with it. */
async function inspect(file: File): Promise<void> {
  try {
    const ckpt = await loadCheckpoint(file);
    const bytes = ckpt.tensors.reduce((n, t) => n + t.data.byteLength, 0);
    show(
      "dropped",
      `${file.name}: verified. Step ${ckpt.metadata.step}, ${ckpt.tensors.length} tensors (${fmtBytes(bytes)}), ` +
        `loss ${ckpt.metadata.metrics?.loss?.toFixed(4) ?? "?"}`,
      "ok",
    );
  } catch (e) {
    show("dropped", `${file.name} is not a valid checkpoint: ${(e as Error).message}`, "error");
  }
}
(globalThis as { inspectFile?: typeof inspect }).inspectFile = inspect;

main().catch((e) => {
  state.error = (e as Error).message;
  show("status", `error: ${(e as Error).message}`, "error");
});
