#!/usr/bin/env bash
# Builds Release and runs every benchmark, printing each command before it runs.
#   BENCH_ONLY    header | io | dduf | http | python   run only bench_header, bench_io, bench_dduf,
#                 bench_http or bench/bench_python_load.py
#                 (default: all)
#   BENCH_DIR     folder for the benchmarks' input files, outputs and scratch files (default /tmp;
#                 needs about 7 GB free)
#   BENCH_PASSES  bench_io passes (default 7); BENCH_DDUF_PASSES bench_dduf passes (default 5);
#                 BENCH_HTTP_PASSES bench_http passes (default 5; needs nginx and curl, see install-deps.sh)
#                 BENCH_PYTHON_PASSES bench_python_load.py passes (default 9)
#   BENCH_REPS    Google Benchmark repetitions for bench_header (default 15)
# docs/PERFORMANCE.md records results of this script and how to read them.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

run() { printf '\n$ %s\n' "$*"; "$@"; }
only=${BENCH_ONLY:-}

bash scripts/install-deps.sh
bash scripts/build.sh -DSAFEWEIGHTS_BUILD_BENCH=ON
echo "built $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min)"

if [[ -z $only || $only == header ]]; then
  # Repetitions interleaved in random order, so a burst of noise from a neighbour on this shared VM
  # does not land on all repetitions of one benchmark.
  run build/bench/bench_header --benchmark_repetitions="${BENCH_REPS:-15}" \
    --benchmark_enable_random_interleaving=true \
    --benchmark_report_aggregates_only=true --benchmark_display_aggregates_only=true
fi
if [[ -z $only || $only == io ]]; then
  run build/bench/bench_io --dir "${BENCH_DIR:-/tmp}" --passes "${BENCH_PASSES:-7}"
fi
if [[ -z $only || $only == dduf ]]; then
  run build/bench/bench_dduf --dir "${BENCH_DIR:-/tmp}" --passes "${BENCH_DDUF_PASSES:-5}"
fi
if [[ -z $only || $only == http ]]; then
  run build/bench/bench_http --dir "${BENCH_DIR:-/tmp}" --passes "${BENCH_HTTP_PASSES:-5}"
fi
if [[ -z $only || $only == python ]]; then
  # The package as built in build/python, on Debian's interpreter (numpy and torch from apt).
  run env PYTHONPATH=build/python /usr/bin/python3 bench/bench_python_load.py --dir "${BENCH_DIR:-/tmp}" \
    --passes "${BENCH_PYTHON_PASSES:-9}"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
