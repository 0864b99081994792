#!/usr/bin/env bash
# Checks that libsafeweights.so exports the safeweights namespace and nothing else (cmake/safeweights.map):
# every defined dynamic symbol, demangled, must be a safeweights:: function or variable, or the vtable,
# typeinfo or thunk of a safeweights class; nothing from simdjson, libdeflate or the standard library.
#   check_exports.sh LIBSAFEWEIGHTS_SO
set -euo pipefail
lib=${1:?usage: check_exports.sh LIBSAFEWEIGHTS_SO}
symbols=$(nm -D --defined-only --format=posix "$lib" | awk '$2 != "A" {print $1}' | c++filt)
count=$(printf '%s\n' "$symbols" | grep -c . || true)
bad=$(printf '%s\n' "$symbols" | grep -Ev \
  '^((vtable|typeinfo|typeinfo name|VTT) for |(non-)?virtual thunk to |guard variable for )?safeweights::' || true)
echo "$lib: $count exported symbols"
if [[ -n $bad ]]; then
  echo "exported symbols outside the safeweights namespace:" >&2
  printf '%s\n' "$bad" | head -n 50 >&2
  exit 1
fi
# The public API is there.
for want in 'safeweights::safetensors::Reader::open(' 'safeweights::open_file(' 'safeweights::is_url(' \
            'typeinfo for safeweights::ByteSource'; do
  # A here-string, not a pipe: grep -q stops reading at the first match, and with pipefail the writer's
  # SIGPIPE would fail the check at random.
  grep -F "$want" <<<"$symbols" >/dev/null || { echo "not exported: $want" >&2; exit 1; }
done
echo "exports: only safeweights symbols"
