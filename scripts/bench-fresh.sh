#!/usr/bin/env bash
# Fresh-process benchmarks (docs/PERFORMANCE.md, "Fresh processes"): whole commands and first calls,
# each in a new process, against a C++ hello-world, a bare interpreter and the reference `safetensors`
# wheel, in rotating order in the same run.
#   FRESH_ROUNDS  rounds (default 15)
#   BASE_CLI      another safeweights binary to measure alongside (e.g. a build of the branch point)
#   BASE_PARSE_TOOL  bench/bench_fresh_parse.cpp built against that other build's library
#   BENCH_DIR     where the sparse synthetic files go (default /tmp)
# The Rust rows come from bench/rust_reference (the reference crate's parse written with serde_json),
# built offline from Debian's crates (librust-serde-json-dev, librust-serde-derive-dev; installed here
# when missing and this runs as root) into build/rust-reference; without cargo they are left out.
# The reference wheel comes from PyPI (pinned in bench/requirements.txt) into build/bench-venv, created
# on first use; nothing else needs it. Without network access the reference rows are left out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dir=${BENCH_DIR:-/tmp}
nice -n 19 cmake --build build --target safeweights_cli bench_fresh_parse safeweights_python >/dev/null
echo "built $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

hello=build/bench/hello_world
if [[ ! -x $hello ]]; then
  printf '#include <iostream>\nint main() { std::cout << "hello" << std::endl; }\n' > build/bench/hello_world.cpp
  c++ -O2 -o "$hello" build/bench/hello_world.cpp
fi

venv=build/bench-venv
ref=()
python=/usr/bin/python3
if [[ ! -x $venv/bin/python ]]; then
  # --system-site-packages: the same interpreter, site and numpy as the package under test, so that
  # start-up differences come from the packages, not from the environments.
  /usr/bin/python3 -m venv --system-site-packages "$venv" && "$venv/bin/pip" install -q -r bench/requirements.txt || rm -rf "$venv"
fi
# Both packages then run on the venv's interpreter: ours from build/python, the wheel from the venv.
[[ -x $venv/bin/python ]] && ref=(--ref-python "$venv/bin/python") && python=$venv/bin/python

rust=()
if command -v cargo >/dev/null; then
  if ! ls -d /usr/share/cargo/registry/serde_json-* >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q librust-serde-json-dev librust-serde-derive-dev >/dev/null || true
  fi
  (cd bench/rust_reference && CARGO_TARGET_DIR=../../build/rust-reference nice -n 19 cargo build --release --offline -q) &&
    rust=(--rust-parse-tool build/rust-reference/release/reference_parse)
fi

build/bench/bench_fresh_parse write "$dir"
base=()
[[ -n ${BASE_CLI:-} ]] && base+=(--base-cli "$BASE_CLI")
[[ -n ${BASE_PARSE_TOOL:-} ]] && base+=(--base-parse-tool "$BASE_PARSE_TOOL")
/usr/bin/python3 bench/bench_fresh.py --cli build/safeweights --parse-tool build/bench/bench_fresh_parse \
  --hello "$hello" --python "$python" --pythonpath build/python "${ref[@]}" "${base[@]}" "${rust[@]}" \
  --f700 "$dir/fresh_llama700.safetensors" --f20k "$dir/fresh_moe20000.safetensors" --rounds "${FRESH_ROUNDS:-15}"
for f in 700 20000; do
  name=$([[ $f == 700 ]] && echo fresh_llama700 || echo fresh_moe20000)
  echo "bench_fresh_parse: first parse and warm median (100 warm parses), $name: $(build/bench/bench_fresh_parse parse "$dir/$name.safetensors" 100)"
  [[ ${#rust[@]} -gt 0 ]] && echo "reference_parse (Rust): the same, $name: $(build/rust-reference/release/reference_parse "$dir/$name.safetensors" 100)"
done
