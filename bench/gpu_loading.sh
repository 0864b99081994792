#!/bin/bash
# Loading benchmarks on the GPU machine, in one go: builds safeweights there (shared/device/README.md),
# runs the loader's Python tests (tests/python/test_loading.py: its CUDA tests run there) and stops if
# they fail, writes the benchmark files, times every loading path against its physical reference in the
# same run (the load after the timed passes is copied back and compared with a CPU load: "verified"),
# and prints a table. Results: $OUT/results.jsonl (one JSON object per run), logs in $OUT.
#
# The build: .device-debs/build-on-device.sh with the Debian packages of .device-debs (shared/device/
# README.md says how to make that folder); without the script there, shared/device/build-on-device.sh
# (in the checkout or beside it) with those packages; without packages, a plain configure and build
# (scripts/build.sh's), for a machine that has the -dev packages installed.
#
#   bash bench/gpu_loading.sh [explore|gpudirect|cold|report]   # from the checkout's root, on the GPU machine
#
# explore: strategies x threads x chunk sizes on the 8 GiB file (to choose the defaults);
# gpudirect: cuFile reads (warm and cold, by read size) against staging, and the 20,000-tensor file by
#          threads and buffer size;
# cold:    cold reads by threads and buffer size against dd iflag=direct;
# report:  the figures docs/PERFORMANCE.md records (8 GiB of 32 MiB tensors, 20,000 small tensors, a cold
#          2 GiB file against dd iflag=direct, Python against the reference safetensors).
set -uo pipefail
mode=${1:-report}
OUT=${OUT:-/tmp/gpu-bench}
DATA=${DATA:-/var/tmp/swdata}
mkdir -p "$OUT" "$DATA"
: > "$OUT/results.jsonl"

build_safeweights() {  # into /tmp/swbuild
  local script
  for script in .device-debs/build-on-device.sh shared/device/build-on-device.sh ../shared/device/build-on-device.sh; do
    if [ -f "$script" ] && compgen -G ".device-debs/*.deb" > /dev/null; then
      echo "build: $script with .device-debs"
      bash "$script" .device-debs /tmp/swbuild -DSAFEWEIGHTS_ALLOW_STATIC_LIBSTDCXX=ON
      return
    fi
  done
  echo "build: no build-on-device.sh with .device-debs packages; plain configure (needs the -dev packages)"
  cmake -S . -B /tmp/swbuild -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAFEWEIGHTS_BUILD_BENCH=OFF \
    -DSAFEWEIGHTS_PYTHON="$(command -v python3)" -DPython3_EXECUTABLE="$(command -v python3)" \
    -DSAFEWEIGHTS_ALLOW_STATIC_LIBSTDCXX=ON && cmake --build /tmp/swbuild -j"$(nproc)"
}
if ! build_safeweights > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; exit 1
fi
export LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/swbuild/python
SW=/tmp/swbuild/safeweights

# The loader's tests before any timing: the C++ ones where the build has them (the Debian-package build
# turns tests off: no GoogleTest there), the Python ones (CUDA loads included) always.
if [ -x /tmp/swbuild/tests/load/load_test ] && ! /tmp/swbuild/tests/load/load_test > "$OUT/load_tests.log" 2>&1; then
  tail -40 "$OUT/load_tests.log"; echo "loader tests failed: no timings"; exit 1
fi
if ! (cd tests/python && SAFEWEIGHTS_CLI=$SW python3 -m pytest -q -p no:cacheprovider -rs test_loading.py) > "$OUT/python_tests.log" 2>&1; then
  tail -40 "$OUT/python_tests.log"; echo "loader tests failed: no timings"; exit 1
fi
tail -3 "$OUT/python_tests.log"
{ nvidia-smi --query-gpu=name,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv; nproc; free -g; } > "$OUT/machine.txt" 2>&1

make_file() {  # kind path [gib]
  [ -f "$2" ] || python3 bench/make_load_files.py "$1" "$2" ${3:+--gib $3}
}
make_file big "$DATA/cold2.safetensors" 2
if [ "$mode" != cold ]; then
  make_file big "$DATA/big8.safetensors" 8
  make_file small "$DATA/small.safetensors"
  cat "$DATA/big8.safetensors" "$DATA/small.safetensors" > /dev/null
fi

run() {  # label, bench arguments...
  local label=$1; shift
  if "$SW" bench --json "$@" > "$OUT/run.json" 2>> "$OUT/errors.log"; then
    sed "s/^{/{\"label\":\"$label\",/" "$OUT/run.json" >> "$OUT/results.jsonl"
  else
    echo "{\"label\":\"$label\",\"failed\":true}" >> "$OUT/results.jsonl"
    tail -3 "$OUT/errors.log"
  fi
}

big=$DATA/big8.safetensors
if [ "$mode" = explore ]; then
  run "host loader t16 c16" --threads 16 --passes 3 "$big"
  run "host loader t16 c4" --threads 16 --chunk-mib 4 --passes 3 "$big"
  for c in 1 2 4 8; do run "staging t16 c$c" --device cuda:0 --strategy staging --threads 16 --chunk-mib $c --passes 3 "$big"; done
  run "staging t14 c2" --device cuda:0 --strategy staging --threads 14 --chunk-mib 2 --passes 3 "$big"
  run "register r256" --device cuda:0 --strategy register --register-mib 256 --passes 3 "$big"
  run "register r1024" --device cuda:0 --strategy register --register-mib 1024 --passes 3 "$big"
  run "hybrid t8 c2 r256" --device cuda:0 --strategy hybrid --threads 8 --chunk-mib 2 --passes 3 "$big"
  run "hybrid t12 c2 r256" --device cuda:0 --strategy hybrid --threads 12 --chunk-mib 2 --passes 3 "$big"
  run "hybrid t14 c4 r512" --device cuda:0 --strategy hybrid --threads 14 --chunk-mib 4 --register-mib 512 --passes 3 "$big"
  run "small staging t16 c2" --device cuda:0 --strategy staging --threads 16 --chunk-mib 2 --passes 3 "$DATA/small.safetensors"
elif [ "$mode" = gpudirect ]; then
  # cuFile against staging, warm and cold.
  cold=$DATA/cold2.safetensors
  run "warm staging" --device cuda:0 --passes 3 "$big"
  for b in 4 16 64; do run "warm gpudirect b$b" --device cuda:0 --strategy gpudirect --buffer-mib $b --passes 3 "$big"; done
  run "warm gpudirect t4 b64" --device cuda:0 --strategy gpudirect --threads 4 --buffer-mib 64 --passes 3 "$big"
  run "small gpudirect" --device cuda:0 --strategy gpudirect --passes 3 "$DATA/small.safetensors"
  for t in 16 12 8; do for b in 2 4; do
    run "small staging t$t b$b" --device cuda:0 --strategy staging --threads $t --buffer-mib $b --passes 5 "$DATA/small.safetensors"
  done; done
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
  dd if="$cold" of=/dev/null bs=16M iflag=direct 2> "$OUT/dd.txt"
  run "cold staging" --device cuda:0 --cold --passes 2 "$cold"
  for b in 16 64; do run "cold gpudirect b$b" --device cuda:0 --cold --strategy gpudirect --buffer-mib $b --passes 2 "$cold"; done
  run "cold gpudirect t4 b64" --device cuda:0 --cold --strategy gpudirect --threads 4 --buffer-mib 64 --passes 2 "$cold"
elif [ "$mode" = cold ]; then
  cold=$DATA/cold2.safetensors
  dd_direct() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; dd if="$cold" of=/dev/null bs=16M iflag=direct 2>&1 | tail -1 >> "$OUT/dd.txt"; }
  dd_direct
  run "cold t16 b16" --device cuda:0 --cold --passes 2 "$cold"
  run "cold t4 b16" --device cuda:0 --cold --threads 4 --passes 2 "$cold"
  run "cold t2 b16" --device cuda:0 --cold --threads 2 --passes 2 "$cold"
  run "cold t8 b64" --device cuda:0 --cold --threads 8 --buffer-mib 64 --chunk-mib 64 --passes 2 "$cold"
  run "cold t16 b4" --device cuda:0 --cold --buffer-mib 4 --passes 2 "$cold"
  run "cold cpu t4" --cold --threads 4 --passes 2 "$cold"
  dd_direct
  cat "$OUT/dd.txt"
else
  run "8 GiB, 32 MiB tensors" --device cuda:0 --passes 5 "$big"
  run "20,000 small tensors" --device cuda:0 --passes 5 "$DATA/small.safetensors"
  run "8 GiB, CPU loader" --passes 5 "$big"
  run "20,000 small, CPU loader" --passes 5 "$DATA/small.safetensors"
  # The disk's limit first (a virtio disk may cache on the host side: the same order every time).
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
  dd if="$DATA/cold2.safetensors" of=/dev/null bs=16M iflag=direct 2> "$OUT/dd.txt"
  run "cold 2 GiB" --device cuda:0 --cold --passes 2 "$DATA/cold2.safetensors"
  python3 bench/gpu_python.py "$big" "$DATA/small.safetensors" >> "$OUT/results.jsonl" 2>> "$OUT/errors.log" || tail -5 "$OUT/errors.log"
fi

python3 - "$OUT/results.jsonl" "$OUT/dd.txt" <<'PY'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'run':34} {'strategy':9} {'GB/s':>7} {'limit':>7} {'ratio':>6}  verified  reg_s  unreg_s")
for r in rows:
    if r.get("failed"):
        print(f"{r['label']:34} FAILED"); continue
    limit = r.get("h2d_pinned_gbps", r.get("pread_gbps", 0))
    ratio = r.get("ratio") if "h2d_pinned_gbps" in r else r.get("ratio_pread", 0)
    if "reference_gbps" in r:
        print(f"{r['label']:34} {'python':9} {r['load_gbps']:7.2f} {r['reference_gbps']:7.2f} {r['speedup']:6.1f}x {str(r['verified']):8} (limit column: safetensors load_file)")
        continue
    print(f"{r['label']:34} {r.get('strategy', 'cpu'):9} {r['load_gbps']:7.2f} {limit:7.2f} {ratio:6.2f}  {str(r.get('verified','')):8}  {r.get('register_s','')}  {r.get('unregister_s','')}  {r.get('file_read_path','')}")
try:
    m = re.search(r"([\d.]+) GB/s", open(sys.argv[2]).read())
    if m: print(f"{'dd iflag=direct bs=16M (cold 2 GiB)':34} {'':9} {float(m.group(1)):7.2f}")
except OSError:
    pass
PY
