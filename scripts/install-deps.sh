#!/usr/bin/env bash
# Installs the Debian 12 packages safeweights needs to build, test, fuzz and benchmark.
#   scripts/install-deps.sh          everything (scripts/test.sh)
#   scripts/install-deps.sh --main   only what the library, the CLI and the Python package need to build
#                                    and run (scripts/quickstart.sh): no test, fuzz or benchmark tools
# Idempotent: when every package is already installed it does not touch apt at all.
set -euo pipefail

MAIN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libsimdjson-dev libcli11-dev libdeflate-dev
  libcurl4-openssl-dev       # the HTTP(S) byte source
  python3 python3-dev pybind11-dev python3-numpy   # the Python package and the quick start's demo
)
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libsimdjson-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev libdeflate-dev
  clang libclang-rt-14-dev   # libFuzzer and the sanitizer runtimes for clang
  clang-format               # the tree's style (.clang-format), checked by scripts/test.sh
  python3 python3-numpy
  zip unzip                  # Info-ZIP, for the DDUF interoperability tests
  python3-dev pybind11-dev   # the Python package (python/)
  python3-pytest python3-torch python3-venv python3-pip
  libcurl4-openssl-dev       # the HTTP(S) byte source
  nginx curl openssl         # a real Range-serving server (http and https) for the HTTP tests, the curl
                             # benchmark peer, and a throwaway certificate for the https tests
)

case "${1:-}" in
  --main) PACKAGES=("${MAIN_PACKAGES[@]}") ;;
  "") ;;
  *) echo "install-deps: unknown argument $1 (--main or nothing)" >&2; exit 2 ;;
esac

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$pkg")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

if [[ $(id -u) -eq 0 ]]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "install-deps: missing packages (${missing[*]}) and not root, and sudo is not available" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
