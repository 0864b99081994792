#!/usr/bin/env bash
# README command 2: install dependencies, build Release, run the unit tests.
#
#   scripts/test.sh            Release build (build/) + ctest (the Python suite on Debian's numpy 1.24 and
#                              torch 1.13), then the Python suite again on numpy 2 in the pinned venv
#                              build/venv-np2 (scripts/python-env.sh, tests/python/requirements.txt), then
#                              the PyTorch checkpoint tests with a current torch from the registry and the
#                              real clients' suite tests/clients/ (transformers, diffusers, accelerate,
#                              gguf-py, llama.cpp through llama-cpp-python), both in the clients' venv
#                              (tests/clients/requirements.txt; cached outside the clone, keyed by its
#                              pins: scripts/python-env.sh --cached; made in the background during the
#                              build), then the remote-sources suite tests/remote/ (s3:// against moto
#                              in server mode, seeded by boto3 and the AWS CLI; its own cached venv), then
#                              the reference safetensors' own tests through an import shim
#                              (scripts/upstream-tests.sh), then jax/flax, TensorFlow, PaddlePaddle and MLX
#                              (tests/frameworks/ and the reference's comparisons; their own cached venv),
#                              and the wheel built, repaired and tested in
#                              a clean venv (scripts/check-wheel.sh)
#   scripts/test.sh --full     also (a) the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
#                              (build-asan/) and (b) every libFuzzer target for FUZZ_SECONDS seconds each
#                              (default 60), seeded from fuzz/corpus/ (built in build-fuzz/ alone, in
#                              build-asan/ with (a); runs in build-fuzz/). CI=true implies --full.
#   scripts/test.sh --asan     only (a);   scripts/test.sh --fuzz   only (b)
# Environment: FUZZ_SECONDS; SANITIZE_CC / SANITIZE_CXX, the compilers of the sanitizer build (clang);
# SAFEWEIGHTS_FRAMEWORKS=0 leaves out the frameworks step (jax/flax, TensorFlow, paddle, MLX: a 3 GB
# venv of CPU wheels, tests/frameworks/requirements.txt);
# SAFEWEIGHTS_CLIENTS=0 leaves out the current-torch and clients steps (and their ~3.5 GB download and
# the llama.cpp build; SAFEWEIGHTS_CURRENT_TORCH=0 is the old name); SAFEWEIGHTS_CACHE, where the
# clients' venv is kept (default ~/.cache/safeweights).
# Exits non-zero on the first failing part.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

do_release=1 do_asan=0 do_fuzz=0
for arg in "$@"; do
  case "$arg" in
    --full) do_asan=1 do_fuzz=1 ;;
    --asan) do_release=0 do_asan=1 ;;
    --fuzz) do_release=0 do_fuzz=1 ;;
    -h|--help) sed -n '2,/^# Exits non-zero/p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
  esac
done
if [[ "${CI:-}" == "true" ]]; then do_release=1 do_asan=1 do_fuzz=1; fi

# Each section says when it began, in minutes and seconds since the script started (CI's time budget).
clock() { printf '[%d:%02d]' $(($1 / 60)) $(($1 % 60)); }
section() { printf '\n==================== %s ==================== %s\n' "$*" "$(clock "$SECONDS")"; }
# CI builds every tree warning-free (GCC for Release, clang for the sanitizer and fuzz trees).
werror=()
[[ ${CI:-} == true ]] && werror=(-DSAFEWEIGHTS_WERROR=ON)
jobs=$(nproc)
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
FUZZ_TARGETS=(fuzz_safetensors_header fuzz_slice fuzz_roundtrip fuzz_dduf fuzz_pickle fuzz_checkpoint fuzz_legacy_view fuzz_gguf fuzz_dequantize fuzz_hf_folder fuzz_tokenizer fuzz_listing fuzz_tiktoken fuzz_original_folder fuzz_imatrix)
passed_total=0 failed_total=0

# Runs ctest in build folder $1, keeping its summary counts. Then VAR=value arguments (the environment)
# and ctest options (-L gguf), in that order.
run_ctest() {
  local dir=$1 log
  shift
  local vars=()
  while [[ $# -gt 0 && $1 == *=* ]]; do vars+=("$1"); shift; done
  log=$(mktemp)
  # pipefail: a failing ctest fails the pipeline, and set -e stops the script.
  env "${vars[@]}" ctest --test-dir "$dir" --output-on-failure -j2 "$@" | tee "$log"
  local line
  line=$(grep -E '[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  rm -f "$log"
  if [[ $line =~ ([0-9]+)\ tests?\ failed\ out\ of\ ([0-9]+) ]]; then
    failed_total=$((failed_total + BASH_REMATCH[1]))
    passed_total=$((passed_total + BASH_REMATCH[2] - BASH_REMATCH[1]))
  fi
}

# The C++ sources follow .clang-format (clang-format 14, Debian 12's): `clang-format -i FILE` fixes one.
format_check() {
  section "format (.clang-format)"
  local files
  mapfile -t files < <(git ls-files '*.cpp' '*.h')
  if ! clang-format --dry-run --Werror "${files[@]}"; then
    echo "format: the files above do not follow .clang-format (run: clang-format -i FILE)" >&2
    return 1
  fi
  echo "format: ${#files[@]} files follow .clang-format"
}

release_tests() {
  format_check
  section "Release build (build/)"
  clients_env_start
  bash scripts/build.sh

  section "unit tests (Release)"
  run_ctest build

  python_np2_tests
  current_torch_tests
  clients_tests
  quant_judge_tests
  remote_tests
  upstream_python_tests
  frameworks_tests
  wheel_test
}

# The Python suite a second time, in the pinned venv of scripts/python-env.sh (numpy 2, ml_dtypes, the
# reference safetensors and huggingface_hub; no torch, so the torch tests skip there). ctest above ran
# it on Debian's numpy 1.24 and torch 1.13. Without the package index the venv cannot be made: a
# failure under CI=true, a skipped step (said so) on a developer's machine.
python_np2_tests() {
  [[ -d build/python/safeweights ]] || return 0   # the Python package is not built
  section "Python suite on numpy 2 (build/venv-np2)"
  local py log line
  if ! py=$(bash scripts/python-env.sh build/venv-np2); then
    if [[ "${CI:-}" == "true" ]]; then
      echo "python-env.sh failed: cannot make the numpy 2 test environment" >&2
      return 1
    fi
    echo "SKIPPED: python-env.sh could not make build/venv-np2 (no package index?)"
    return 0
  fi
  log=$(mktemp)
  # pipefail: a failing pytest fails the pipeline, and set -e stops the script.
  (cd tests/python && env PYTHONPATH="$PWD/../../build/python" SAFEWEIGHTS_CLI="$PWD/../../build/safeweights" \
    PYTHONDONTWRITEBYTECODE=1 "$OLDPWD/$py" -m pytest -q -p no:cacheprovider .) | tee "$log"
  line=$(tail -n 1 "$log")
  rm -f "$log"
  if [[ $line =~ ([0-9]+)\ passed ]]; then passed_total=$((passed_total + BASH_REMATCH[1])); fi
  if [[ $line =~ ([0-9]+)\ failed ]]; then failed_total=$((failed_total + BASH_REMATCH[1])); fi
  # The ctest entries that need this venv (gguf-py reading what convert writes) skipped in the first
  # ctest run, which comes before the venv exists: run them now.
  section "ctest entries that need the numpy 2 venv (label gguf)"
  run_ctest build -L gguf
  return 0
}

# The clients' venv (tests/clients/requirements.txt: a current torch from the registry, which needs its
# CUDA runtime wheels to import, ~3 GB; transformers, diffusers, accelerate, gguf-py; llama-cpp-python,
# whose sdist builds llama.cpp from source) is made in the background while the C++ build runs, in a
# process group of its own so an early exit stops it, and kept outside the clone keyed by its pins, so
# a later run with the same pins starts at once. Without the package index: a failure under CI=true, a
# skipped step (said so) on a developer's machine.
clients_env_pid=""
clients_python=""
clients_env_start() {
  [[ ${SAFEWEIGHTS_CLIENTS:-${SAFEWEIGHTS_CURRENT_TORCH:-1}} != 0 ]] || return 0
  mkdir -p build
  # llama.cpp built for any x86-64 (the cache may outlive this machine's CPU), without its tools.
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF" \
    CMAKE_BUILD_PARALLEL_LEVEL=$jobs setsid bash scripts/python-env.sh --cached venv-clients tests/clients/requirements.txt \
    >build/venv-clients.python 2>build/venv-clients.log &
  clients_env_pid=$!
  # The pinned llama.cpp's source and its llama-quantize / llama-imatrix (scripts/llama-cpp.sh), the
  # reference the GGUF tests compare bytes with, made beside it and cached the same way.
  setsid bash scripts/llama-cpp.sh --tools >build/llama-cpp.bin 2>build/llama-cpp.log &
  llama_cpp_pid=$!
  # The remote-sources and frameworks venvs (about 3 GB of wheels) download and install meanwhile too;
  # cached_venv waits for them. On a fresh machine this overlaps their downloads with the build.
  venv_start venv-remote tests/remote/requirements.txt
  [[ ${SAFEWEIGHTS_FRAMEWORKS:-1} == 0 ]] || venv_start venv-frameworks tests/frameworks/requirements.txt
  trap 'for p in $clients_env_pid $llama_cpp_pid ${venv_pids[*]}; do kill -- -"$p" 2>/dev/null || true; done' EXIT
}

# `venv_start NAME REQUIREMENTS`: makes the cached venv NAME in the background, in a process group of
# its own; cached_venv NAME waits for it (and reports a failure itself, by trying again).
declare -A venv_pids=()
venv_start() {
  setsid bash scripts/python-env.sh --cached "$1" "$2" >/dev/null 2>"build/$1.log" &
  venv_pids[$1]=$!
}

# Waits for background job $1, which makes $3 and logs to $2: status 0 when it succeeded; otherwise it
# shows the log's end and fails under CI=true (status 1), or says the steps that need it are skipped
# (status 2: no package index on a developer's machine).
background_wait() {
  wait "$1" && return 0
  tail -n 30 "$2"
  if [[ "${CI:-}" == "true" ]]; then
    echo "cannot make $3" >&2
    return 1
  fi
  echo "SKIPPED: could not make $3 (no package index?)"
  return 2
}

# Waits for the clients' venv; sets clients_python, or says why there is none.
clients_env_wait() {
  [[ -n $clients_env_pid ]] || return 0
  local start=$SECONDS pid=$clients_env_pid rc=0
  clients_env_pid=""
  background_wait "$pid" build/venv-clients.log "the clients' test environment (python-env.sh)" || rc=$?
  ((rc == 0)) || return $((rc == 1))
  clients_python=$(tail -n 1 build/venv-clients.python)
  echo "(waited $((SECONDS - start)) s for the clients' venv $clients_python after the steps before)"
  llama_cpp_wait
}

# Waits for the pinned llama.cpp (scripts/llama-cpp.sh --tools); exports SAFEWEIGHTS_LLAMA_TOOLS (its
# llama-quantize and llama-imatrix) and SAFEWEIGHTS_LLAMA_CPP (its source: convert_hf_to_gguf.py,
# ggml/) for the tests, or says why there are none (a failure under CI=true).
llama_cpp_pid=""
llama_cpp_wait() {
  [[ -n $llama_cpp_pid ]] || return 0
  local start=$SECONDS pid=$llama_cpp_pid rc=0
  llama_cpp_pid=""
  background_wait "$pid" build/llama-cpp.log "the pinned llama.cpp (llama-cpp.sh)" || rc=$?
  ((rc == 0)) || return $((rc == 1))
  SAFEWEIGHTS_LLAMA_TOOLS=$(tail -n 1 build/llama-cpp.bin)
  SAFEWEIGHTS_LLAMA_CPP=$(dirname "$(dirname "$SAFEWEIGHTS_LLAMA_TOOLS")")/src
  export SAFEWEIGHTS_LLAMA_TOOLS SAFEWEIGHTS_LLAMA_CPP
  echo "(waited $((SECONDS - start)) s for the pinned llama.cpp $SAFEWEIGHTS_LLAMA_CPP)"
}

# The PyTorch checkpoint tests (tests/pytorch/test_checkpoints.py) a second time, with a current torch
# writing the checkpoints and loading them for comparison; ctest ran them with Debian's torch 1.13.
current_torch_tests() {
  clients_env_wait
  [[ -n $clients_python ]] || return 0
  section "PyTorch checkpoints with a current torch (the clients' venv)"
  if ! "$clients_python" tests/pytorch/test_checkpoints.py --cli build/safeweights --require-torch; then
    failed_total=$((failed_total + 1))
    return 1
  fi
  passed_total=$((passed_total + 1))
}

# What users run, end to end (tests/clients/): transformers 5, diffusers, accelerate, gguf-py and
# llama.cpp reading what we write and writing what we read, on tiny models made at test time, offline.
clients_tests() {
  [[ -n $clients_python && -d build/python/safeweights ]] || return 0
  section "real clients end to end (tests/clients, the clients' venv)"
  local log line
  log=$(mktemp)
  (cd tests/clients && env PYTHONPATH="$PWD/../../build/python" SAFEWEIGHTS_CLI="$PWD/../../build/safeweights" \
    HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONDONTWRITEBYTECODE=1 "$clients_python" -m pytest -q -p no:cacheprovider -rs .) | tee "$log"
  line=$(tail -n 1 "$log")
  rm -f "$log"
  if [[ $line =~ ([0-9]+)\ passed ]]; then passed_total=$((passed_total + BASH_REMATCH[1])); fi
  if [[ $line =~ ([0-9]+)\ failed ]]; then failed_total=$((failed_total + BASH_REMATCH[1])); fi
  return 0
}

# The quant judge (tests/quant/ggml_differential.sh): our quantizers, with and without importance
# weights, and dequantizers against the pinned llama.cpp's ggml, byte for byte, over its row corpus,
# linked with the tools' libggml-base.a (seconds). One test; any difference fails CI. Needs the pinned
# llama.cpp (clients_env_wait waited for it): a failure under CI=true without it, a skip elsewhere.
quant_judge_tests() {
  section "quant judge: quantizers against the pinned ggml (tests/quant/ggml_differential.sh)"
  if [[ -z ${SAFEWEIGHTS_LLAMA_CPP:-} ]]; then
    if [[ "${CI:-}" == "true" ]]; then
      echo "quant judge: SAFEWEIGHTS_LLAMA_CPP is not set (no pinned llama.cpp)" >&2
      failed_total=$((failed_total + 1))
      return 1
    fi
    echo "SKIPPED: no pinned llama.cpp (SAFEWEIGHTS_LLAMA_CPP unset)"
    return 0
  fi
  if ! bash tests/quant/ggml_differential.sh "$SAFEWEIGHTS_LLAMA_CPP"; then
    failed_total=$((failed_total + 1))
    return 1
  fi
  passed_total=$((passed_total + 1))
}

# Makes (or finds) a cached venv: `cached_venv NAME REQUIREMENTS WHAT` sets venv_python; without the
# package index it fails under CI=true (status 1) and says the step is skipped elsewhere (status 2).
venv_python=""
cached_venv() {
  venv_python=""
  if [[ -n ${venv_pids[$1]:-} ]]; then
    local start=$SECONDS
    wait "${venv_pids[$1]}" || true
    unset "venv_pids[$1]"
    echo "(waited $((SECONDS - start)) s for the $3 venv made in the background)"
  fi
  if venv_python=$(bash scripts/python-env.sh --cached "$1" "$2"); then return 0; fi
  if [[ "${CI:-}" == "true" ]]; then
    echo "python-env.sh failed: cannot make the $3 test environment" >&2
    return 1
  fi
  echo "SKIPPED: python-env.sh could not make the $3 venv (no package index?)"
  return 2
}

# Adds the counts of a pytest summary line ("3 failed, 9 passed, 1 skipped in 2s") to the totals.
count_pytest_line() {
  if [[ $1 =~ ([0-9]+)\ passed ]]; then passed_total=$((passed_total + BASH_REMATCH[1])); fi
  if [[ $1 =~ ([0-9]+)\ failed ]]; then failed_total=$((failed_total + BASH_REMATCH[1])); fi
  return 0
}

# Remote sources (tests/remote/): s3:// names against a real S3-compatible server on loopback (moto in
# server mode, signatures checked) seeded by boto3 and the AWS CLI, gs:// names against a Cloud Storage
# emulator (gcp-storage-emulator) and hf:// names against a Hub stand-in, in their own small venv
# (tests/remote/requirements.txt, cached outside the clone like the clients').
remote_tests() {
  [[ -d build/python/safeweights ]] || return 0
  section "remote sources: S3, Cloud Storage, the Hub (tests/remote: moto + boto3 + the AWS CLI, gcp-storage-emulator)"
  local log made=0
  cached_venv venv-remote tests/remote/requirements.txt remote-sources || made=$?
  if [[ $made != 0 ]]; then return $((made == 1)); fi
  log=$(mktemp)
  (cd tests/remote && env PYTHONPATH="$PWD/../../build/python" SAFEWEIGHTS_CLI="$PWD/../../build/safeweights" \
    PYTHONDONTWRITEBYTECODE=1 "$venv_python" -m pytest -q -p no:cacheprovider -rs .) | tee "$log"
  count_pytest_line "$(tail -n 1 "$log")"
  rm -f "$log"
  return 0
}

# jax/flax, TensorFlow, PaddlePaddle and MLX (tests/frameworks/, then the reference's own comparison
# tests through the import shim), in their venv of CPU wheels (tests/frameworks/requirements.txt, about
# 3 GB, cached outside the clone like the clients'). One process per framework: paddle imported after
# TensorFlow crashes. A framework the registry has no wheel for skips its tests with the reason.
# SAFEWEIGHTS_FRAMEWORKS=0 leaves the step out.
frameworks_tests() {
  [[ ${SAFEWEIGHTS_FRAMEWORKS:-1} != 0 && -d build/python/safeweights ]] || return 0
  section "frameworks: jax/flax, TensorFlow, PaddlePaddle, MLX (tests/frameworks, the frameworks' venv)"
  local py log fw status=0 made=0
  cached_venv venv-frameworks tests/frameworks/requirements.txt frameworks || made=$?
  if [[ $made != 0 ]]; then return $((made == 1)); fi
  py=$venv_python
  log=$(mktemp)
  for fw in flax tf paddle mlx; do
    (cd tests/frameworks && env PYTHONPATH="$PWD/../../build/python" SAFEWEIGHTS_TEST_FRAMEWORK=$fw \
      PYTHONDONTWRITEBYTECODE=1 "$py" -m pytest -q -p no:cacheprovider -rs test_frameworks.py) | tee "$log" || true
    count_pytest_line "$(tail -n 1 "$log")"
  done
  section "the reference's flax, TensorFlow, paddle and MLX comparisons, through the import shim"
  bash scripts/upstream-tests.sh --frameworks "$py" build/python | tee "$log" || status=1
  while read -r line; do
    if [[ $line =~ ^[0-9]+\ (passed|failed|skipped) ]]; then count_pytest_line "$line"; fi
  done < <(grep -E "(passed|failed|skipped).* in [0-9.]+s" "$log")
  rm -f "$log"
  if [[ $status != 0 ]]; then echo "upstream-tests.sh --frameworks failed (see above)" >&2; fi
  return $status
}

# The reference safetensors' own test suite against our package (scripts/upstream-tests.sh: downloaded
# at test time, checked by SHA-256, run through an import shim with Debian's python, numpy and torch).
upstream_python_tests() {
  [[ -d build/python/safeweights ]] || return 0
  section "the reference safetensors' own tests, through an import shim (build/upstream)"
  local log line
  log=$(mktemp)
  if ! bash scripts/upstream-tests.sh /usr/bin/python3 build/python | tee "$log"; then
    rm -f "$log"
    echo "upstream-tests.sh failed (see above)" >&2
    return 1
  fi
  line=$(tail -n 1 "$log")
  rm -f "$log"
  if [[ $line =~ ([0-9]+)\ passed ]]; then passed_total=$((passed_total + BASH_REMATCH[1])); fi
  return 0
}

# The wheel as users get it (scripts/check-wheel.sh): built by scikit-build-core, repaired by auditwheel,
# installed into a clean venv of another Python (3.12/3.13 where one is found) and tested there. Needs
# the package index, as python_np2_tests does.
wheel_test() {
  [[ -d build/python/safeweights ]] || return 0
  section "wheel: build, auditwheel repair, clean-venv install and tests (build/wheel-check)"
  if ! bash scripts/check-wheel.sh build/wheel-check; then
    echo "check-wheel.sh failed (see above)" >&2
    return 1
  fi
}

# With the fuzzing part too (--full, CI), the sanitizer tree also builds the libFuzzer targets: they need
# the same clang, ASan and UBSan, plus coverage instrumentation of the library (which the unit tests then
# run with too, harmlessly), so one clang build serves both instead of two (about a tenth of CI's time on
# a 2-core machine). fuzz_tests takes its targets from there.
fuzz_bin=build-fuzz/fuzz
asan_tests() {
  section "ASan + UBSan build (build-asan/)"
  local with_fuzz=OFF
  if ((do_fuzz)) && [[ ${SANITIZE_CXX:-clang++} == *clang* ]]; then with_fuzz=ON; fi
  CC="${SANITIZE_CC:-clang}" CXX="${SANITIZE_CXX:-clang++}" cmake -S . -B build-asan -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSAFEWEIGHTS_SANITIZE=ON -DSAFEWEIGHTS_BUILD_BENCH=OFF \
    -DSAFEWEIGHTS_BUILD_FUZZ="$with_fuzz" "${werror[@]}"
  cmake --build build-asan -j"$jobs"
  [[ $with_fuzz == OFF ]] || fuzz_bin=build-asan/fuzz

  section "unit tests (ASan + UBSan)"
  run_ctest build-asan ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
}

fuzz_one() {
  local target=$1
  local bin="$fuzz_bin/$target" work="build-fuzz/corpus-work/$target"
  local artifacts="build-fuzz/artifacts/$target" log="build-fuzz/$target.log"
  local seeds=() dict=()
  [[ -d fuzz/corpus/$target ]] && seeds+=("fuzz/corpus/$target")
  mkdir -p "$work" "$artifacts"
  if [[ $target == fuzz_safetensors_header && -d tests/corpus/safetensors ]]; then
    seeds+=(tests/corpus/safetensors)
  fi
  # The DDUF target starts from the checked-in DDUF corpus (valid and malformed archives).
  if [[ $target == fuzz_dduf && -d tests/dduf/corpus ]]; then
    seeds+=(tests/dduf/corpus)
  fi
  # The GGUF target also starts from the malformed-file corpus (a file per reader rule).
  if [[ $target == fuzz_gguf && -d tests/gguf/corpus ]]; then
    seeds+=(tests/gguf/corpus)
  fi
  [[ -f fuzz/$target.dict ]] && dict=(-dict="fuzz/$target.dict")
  export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Inputs that once crashed must stay fixed: run each once.
  if compgen -G "fuzz/regressions/$target/*" >/dev/null; then
    echo "replaying fuzz/regressions/$target/"
    if ! "$bin" fuzz/regressions/"$target"/* >"$log" 2>&1; then
      tail -n 60 "$log"
      return 1
    fi
  fi
  # The first corpus folder receives new inputs; the checked-in seeds are only read.
  echo "$ $bin $work ${seeds[*]} ${dict[*]} -max_total_time=$FUZZ_SECONDS ..."
  if ! "$bin" "$work" "${seeds[@]}" "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "crashing input: $(ls -t "$artifacts" | head -n 1 | sed "s|^|$artifacts/|")"
    return 1
  fi
  grep -E '^#[0-9]+.*DONE' "$log" || tail -n 3 "$log"
}

fuzz_tests() {
  if [[ $fuzz_bin == build-fuzz/fuzz ]]; then
    section "fuzz build (build-fuzz/, clang, libFuzzer + ASan + UBSan)"
    CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DSAFEWEIGHTS_BUILD_FUZZ=ON -DSAFEWEIGHTS_BUILD_TESTS=OFF -DSAFEWEIGHTS_BUILD_BENCH=OFF "${werror[@]}"
    cmake --build build-fuzz -j"$jobs" --target "${FUZZ_TARGETS[@]}"
  fi

  # The targets run side by side, one per core (each libFuzzer process is one thread: every target
  # still gets FUZZ_SECONDS of a core), each into its own report, printed in order when all are done;
  # each report's title says when that target ran (the section stamps are the time of printing).
  local failed=() target running=0 reports=build-fuzz/reports
  rm -rf "$reports" && mkdir -p "$reports"
  section "fuzzing: ${#FUZZ_TARGETS[@]} targets, ${FUZZ_SECONDS}s each, $jobs at a time"
  for target in "${FUZZ_TARGETS[@]}"; do
    if [[ $running -ge $jobs ]]; then wait -n || true; running=$((running - 1)); fi
    {
      local began=$SECONDS
      if fuzz_one "$target" >"$reports/$target" 2>&1; then echo 0; else echo 1; fi >"$reports/$target.rc"
      echo "ran $(clock "$began") to $(clock "$SECONDS")" >"$reports/$target.when"
    } &
    running=$((running + 1))
  done
  wait
  for target in "${FUZZ_TARGETS[@]}"; do
    section "fuzz $target (${FUZZ_SECONDS}s, $(cat "$reports/$target.when" 2>/dev/null))"
    cat "$reports/$target"
    [[ $(cat "$reports/$target.rc" 2>/dev/null) == 0 ]] || failed+=("$target")
  done
  if [[ ${#failed[@]} -gt 0 ]]; then
    section "FUZZING FAILED: ${failed[*]}"
    echo "crashing inputs: build-fuzz/artifacts/<target>/; logs: build-fuzz/<target>.log"
    return 1
  fi
  echo "fuzzing: ${#FUZZ_TARGETS[@]} targets, ${FUZZ_SECONDS}s each, no crash"
}

section "install dependencies"
bash scripts/install-deps.sh

done_parts=()
if [[ $do_release -eq 1 ]]; then release_tests; done_parts+=("Release tests"); fi
if [[ $do_asan -eq 1 ]]; then asan_tests; done_parts+=("ASan+UBSan tests"); fi
if [[ $do_fuzz -eq 1 ]]; then fuzz_tests; done_parts+=("fuzzing ${FUZZ_SECONDS}s per target"); fi

section "all passed: $(IFS=,; echo "${done_parts[*]}" | sed 's/,/, /g')"
if [[ $do_asan -eq 0 && $do_fuzz -eq 0 ]]; then
  echo "(scripts/test.sh --full adds the sanitizer run and fuzzing; CI does both)"
fi
if [[ $do_release -eq 1 || $do_asan -eq 1 ]]; then
  # Test executions over every ctest run above (the sanitizer run repeats the Release suite).
  echo "tests: $passed_total passed, $failed_total failed"
fi
