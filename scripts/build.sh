#!/usr/bin/env bash
# Configures and builds the Release tree in build/ (library, CLI at build/safeweights, tests, benchmarks).
# Extra arguments are passed to the cmake configure step (e.g. -DSAFEWEIGHTS_BUILD_BENCH=OFF).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# CI (CI=true) turns warnings into errors (SAFEWEIGHTS_WERROR: every target, tests and benchmarks included).
werror=()
[[ ${CI:-} == true ]] && werror=(-DSAFEWEIGHTS_WERROR=ON)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${werror[@]}" "$@"
cmake --build build -j"$(nproc)"
