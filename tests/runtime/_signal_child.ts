// A child for signals_test.ts. `listen SIG...`: prints "ready", then on each signal prints its
// name and, at the second, exits with exitStatus. `orphan`: spawns a grandchild that watches
// its parent (this process) and prints "orphaned PID" when it is gone; prints the grandchild's
// pid and waits to be killed.
import { exitProcess, exitStatus, onOrphaned, onSignal, type StopSignal } from "../../src/runtime/signals.ts";

const [mode, ...rest] = Deno.args;
if (mode === "listen") {
  let seen = 0;
  for (const name of rest as StopSignal[]) {
    onSignal(name, (signal) => {
      console.log(`got ${signal}`);
      if (++seen === 2) exitProcess(exitStatus(signal));
    });
  }
  console.log("ready");
  setInterval(() => {}, 1000);
} else if (mode === "orphan") {
  const grandchild = new Deno.Command(Deno.execPath(), {
    args: ["run", "--allow-read", import.meta.filename!, "watch"],
    stdout: "inherit",
  }).spawn();
  console.log(`grandchild ${grandchild.pid}`);
  await grandchild.status;
} else if (mode === "watch") {
  onOrphaned((pid) => {
    console.log(`orphaned ${pid}`);
    exitProcess(0);
  }, 50);
  console.log("watching");
  setTimeout(() => exitProcess(3), 30_000); // never left behind
}
