#!/usr/bin/env bash
# libcurl is loaded on the first URL, never at start-up (src/io/curl_api.h): neither the CLI nor the
# shared library may list it as NEEDED, a local `validate` must never map it, and a URL must load it
# (which also shows that the LD_DEBUG check below can see a load).
# Usage: startup_check.sh CLI VALID_FILE [LIBSAFEWEIGHTS_SO]
set -euo pipefail
cli=$1 file=$2 shared=${3:-}

fail() { echo "FAIL: $*" >&2; exit 1; }

for binary in "$cli" "$shared"; do
  [[ -n $binary && -e $binary ]] || continue
  if readelf -d "$binary" | grep NEEDED | grep -qi curl; then
    fail "$binary lists libcurl as NEEDED: $(readelf -d "$binary" | grep NEEDED | grep -i curl)"
  fi
done

# LD_DEBUG=files names every object the dynamic loader opens, at start-up or through dlopen().
loaded_by() { LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -o 'file=[^ ]*curl[^ ]*' | sort -u || true; }

local_run=$(loaded_by "$cli" validate "$file")
[[ -z $local_run ]] || fail "a local validate loaded libcurl: $local_run"

url_run=$(loaded_by "$cli" inspect http://127.0.0.1:9/model.safetensors | tr "\n" " ")
[[ -n $url_run ]] || fail "opening a URL did not load libcurl (is the LD_DEBUG check blind?)"

echo "startup_check: no libcurl at start-up or for local files; loaded for a URL ($url_run)"
