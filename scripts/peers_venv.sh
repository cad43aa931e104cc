#!/usr/bin/env bash
# Builds (once) the Python virtual environment of ckpt's peers: Orbax (with JAX), PyTorch's
# Distributed Checkpoint (torch, CPU build), safetensors, TensorFlow (tf.train.Checkpoint) and
# numpy, from local wheel directories only (`pip install --no-index --find-links`), and prints the
# environment's python on the last line of stdout. Run again, it reuses the environment while the
# same wheels are there (a stamp file inside it records them), so CI and the benches can call it
# every time.
#
#   bash scripts/peers_venv.sh            # or: deno task peers:venv
#   PY=$(bash scripts/peers_venv.sh | tail -n 1)
#
# Settings (environment):
#   CKPT_PEERS_VENV  where the environment lives (default ~/.cache/ckpt/peers-venv, or under $XDG_CACHE_HOME)
#   CKPT_WHEELS      colon-separated directories of wheels (default /opt/pypi/files:/opt/wheels)
#   CKPT_PYTHON      the Python 3.11 to build it from (default: python3.11, /usr/bin/python3, python3)
#
# Where a required wheel is absent it names each one missing and the directories it searched, and
# exits 2; where pip cannot resolve a dependency from those directories it prints pip's reason.
set -euo pipefail

VENV="${CKPT_PEERS_VENV:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/ckpt/peers-venv}"
WHEELS="${CKPT_WHEELS:-/opt/pypi/files:/opt/wheels}"

# The peers, pinned to the versions the bench was written against: "pip requirement|wheel file glob".
REQUIRED=(
  "orbax-checkpoint==0.12.4|orbax_checkpoint-0.12.4-*.whl"
  "jax==0.10.2|jax-0.10.2-*.whl"
  "jaxlib==0.10.2|jaxlib-0.10.2-cp311-*.whl"
  "torch==2.13.0+cpu|torch-2.13.0+cpu-cp311-*.whl"
  "safetensors==0.8.0|safetensors-0.8.0-*.whl"
  "tensorflow-cpu==2.21.0|tensorflow_cpu-2.21.0-cp311-*.whl"
  "numpy|numpy-*-cp311-*.whl"
)
# What the environment must hold (checked without importing them: that takes seconds).
MODULES="orbax jax torch safetensors tensorflow numpy"

say() { echo "peers_venv: $*" >&2; }

# The wheels: every required one must be in one of the directories.
IFS=: read -r -a dirs <<<"$WHEELS"
find_links=()
for d in "${dirs[@]}"; do [ -d "$d" ] && find_links+=(--find-links "$d"); done
missing=()
stamp_lines=()
for entry in "${REQUIRED[@]}"; do
  req="${entry%%|*}" glob="${entry#*|}" found=""
  for d in "${dirs[@]}"; do
    # shellcheck disable=SC2086 # the glob is meant to expand
    for f in "$d"/$glob; do [ -f "$f" ] && found="$f"; done
  done
  if [ -z "$found" ]; then missing+=("$req (a wheel named $glob)"); else stamp_lines+=("$req $found"); fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  say "cannot build the peers' environment: these wheels are not in ${WHEELS//:/, }:"
  for m in "${missing[@]}"; do say "  missing: $m"; done
  say "put them in one of those directories, or point CKPT_WHEELS at the directories that hold them"
  exit 2
fi

# A Python 3.11 (the wheels are cp311).
python=""
for p in ${CKPT_PYTHON:-} python3.11 /usr/bin/python3 python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
    python="$p"
    break
  fi
done
if [ -z "$python" ]; then
  say "cannot build the peers' environment: no Python 3.11 with venv and ensurepip found (the wheels are cp311);"
  say "  install Debian's python3 python3-venv, or set CKPT_PYTHON to one"
  exit 2
fi

stamp="$(printf '%s\n' "$("$python" --version 2>&1)" "${stamp_lines[@]}")"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.ckpt-peers-stamp" 2>/dev/null)" = "$stamp" ] &&
  "$VENV/bin/python" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in '$MODULES'.split()))" \
    >/dev/null 2>&1; then
  say "reusing $VENV"
else
  say "building $VENV from ${WHEELS//:/, } with $python (about a minute)"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  "$python" -m venv "$VENV"
  reqs=()
  for entry in "${REQUIRED[@]}"; do reqs+=("${entry%%|*}"); done
  log="$(mktemp)"
  if ! "$VENV/bin/pip" install --no-index "${find_links[@]}" --disable-pip-version-check -q "${reqs[@]}" >"$log" 2>&1; then
    say "pip could not install the peers from ${WHEELS//:/, }:"
    grep -E 'ERROR|No matching distribution|requires' "$log" | head -20 >&2 || tail -20 "$log" >&2
    rm -f "$log"
    rm -rf "$VENV"
    exit 3
  fi
  rm -f "$log"
  printf '%s\n' "$stamp" >"$VENV/.ckpt-peers-stamp"
fi

# The versions that are there, then the python on the last line.
"$VENV/bin/python" - <<'EOF' >&2
import importlib.metadata as m
print("peers_venv: " + ", ".join(f"{p} {m.version(p)}" for p in
      ["orbax-checkpoint", "jax", "jaxlib", "torch", "safetensors", "tensorflow-cpu", "numpy"]))
EOF
echo "$VENV/bin/python"
