#!/usr/bin/env bash
# Configures and builds the Release tree in build/ (library, CLI at build/safeweights, tests, benchmarks).
# Extra arguments are passed to the cmake configure step after the defaults, so they win
# (scripts/quickstart.sh: -DSAFEWEIGHTS_BUILD_TESTS=OFF -DSAFEWEIGHTS_BUILD_BENCH=OFF). The defaults are
# given every time, so a tree configured without tests gets them back from a plain build.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# CI (CI=true) turns warnings into errors (SAFEWEIGHTS_WERROR: every target, tests and benchmarks included).
werror=()
[[ ${CI:-} == true ]] && werror=(-DSAFEWEIGHTS_WERROR=ON)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DSAFEWEIGHTS_BUILD_TESTS=ON -DSAFEWEIGHTS_BUILD_BENCH=ON "${werror[@]}" "$@"
cmake --build build -j"$(nproc)"
