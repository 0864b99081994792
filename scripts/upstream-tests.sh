#!/usr/bin/env bash
# The reference safetensors' own Python tests (bindings/python/tests of the pinned release's source
# archive), run against safeweights through an import shim (tests/python/upstream_shim: `safetensors`
# is safeweights). Downloaded from the package index at test time, checked against its pinned SHA-256,
# unpacked under build/; none of it is committed.
#
#   scripts/upstream-tests.sh PYTHON BUILD_PYTHON_DIR                the numpy and torch suites
#   scripts/upstream-tests.sh --frameworks PYTHON BUILD_PYTHON_DIR   the flax, TensorFlow, paddle and
#                                                                    MLX comparisons, one process each
#
# PYTHON needs numpy, torch and pytest (Debian's /usr/bin/python3 has them); with --frameworks, the
# frameworks' venv (tests/frameworks/requirements.txt). Deselected, each a documented difference
# (docs/PYTHON.md):
#   test_simple.py::ReadmeTestCase::test_numpy_slice  out-of-range slice bounds clamp as in numpy,
#                                                     where the reference raises
#   test_paddle_comparison.py::WithOpenCase::test_paddle_tensor_gpu, ::test_paddle_slice_gpu
#                                                     need a CUDA build of paddle and a GPU (the
#                                                     registry's paddlepaddle wheel is CPU-only)
# test_mlx_comparison.py skips itself off macOS (its reason is printed). Not run: test_handle.py
# (needs fsspec).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
frameworks=0
if [[ ${1:-} == --frameworks ]]; then frameworks=1; shift; fi
python=${1:?usage: upstream-tests.sh [--frameworks] PYTHON BUILD_PYTHON_DIR}
package_dir=$(cd "${2:?usage: upstream-tests.sh [--frameworks] PYTHON BUILD_PYTHON_DIR}" && pwd)

version=0.8.0
url=https://files.pythonhosted.org/packages/45/06/f955dbbb1859e3bd23c8ac6141af5106e7ad5fedec4a3a6e3d60f94b7001/safetensors-$version.tar.gz
sha256=fabaf3e0f18a6618d9b36560682562157f77c2b71fcffc7b432be2baed9d753d
work="$root/build/upstream"
archive="$work/safetensors-$version.tar.gz"

mkdir -p "$work"
if ! { [[ -f $archive ]] && echo "$sha256  $archive" | sha256sum -c --quiet >/dev/null 2>&1; }; then
  curl -fsSL --retry 3 --max-time 300 -o "$archive.part" "$url"
  echo "$sha256  $archive.part" | sha256sum -c --quiet
  mv "$archive.part" "$archive"
fi
rm -rf "$work/safetensors-$version"
tar -xzf "$archive" -C "$work" "safetensors-$version/bindings/python/tests"

# The tests open ./tests/data/...: run from bindings/python.
cd "$work/safetensors-$version/bindings/python"
if [[ $frameworks == 1 ]]; then
  # One process per framework: paddle imported after TensorFlow crashes in paddle's import.
  status=0
  for t in flax tf paddle mlx; do
    PYTHONPATH="$root/tests/python/upstream_shim:$package_dir" PYTHONDONTWRITEBYTECODE=1 \
      "$python" -m pytest -q -p no:cacheprovider -rs "tests/test_${t}_comparison.py" \
      -k "not test_paddle_tensor_gpu and not test_paddle_slice_gpu" || status=1
  done
  exit $status
fi
PYTHONPATH="$root/tests/python/upstream_shim:$package_dir" PYTHONDONTWRITEBYTECODE=1 \
  "$python" -m pytest -q -p no:cacheprovider \
  tests/test_simple.py tests/test_pt_comparison.py tests/test_pt_model.py tests/test_threadable.py \
  tests/test_multithreaded.py tests/test_pread_backend.py \
  --deselect tests/test_simple.py::ReadmeTestCase::test_numpy_slice
