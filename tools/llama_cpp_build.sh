#!/usr/bin/env bash
# The llama.cpp oracle of producer='llama.cpp' (docs/engines.md): a reproducible build of ggml's CPU library (shared) from the llama-cpp-python sdist on PyPI.
#   llama-cpp-python 0.3.36  (sdist sha256 832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e)
#   vendored llama.cpp commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f (2026-10-01), ggml 0.25.3
# Flags: CMake Release (-O3 -DNDEBUG), GGML_NATIVE=ON (default) => ggml-cpu gets -march=native,
#   BUILD_SHARED_LIBS=ON, OpenMP on (default). Compiler used for the reference: gcc 12.2.0 (Debian 12),
#   cmake 4.4.5 + ninja 1.13.2 from PyPI; CPU: AMD Zen 4 (AVX-512, F16C, FMA).
# Output: build/bin/libggml-cpu.so, libggml-base.so, libggml.so. Takes ~2-3 min on 2 cores
# (only the ggml targets are built, not llama).
# NB: `pip download --no-binary :all: llama-cpp-python` tries to build cmake from source to get
# metadata; we fetch the sdist through PyPI's JSON API instead and check its sha256.
set -euo pipefail
# usage: tools/llama_cpp_build.sh [WORKDIR]   (default ~/.cache/sinpe-llama-cpp; prints the
# library's path last; then: python tools/llama_cpp_record.py --lib WORKDIR/build/bin/libggml-cpu.so --check)
WORK="${1:-$HOME/.cache/sinpe-llama-cpp}"
mkdir -p "$WORK"
cd "$WORK"
VER=0.3.36
SHA=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
[ -x venv/bin/cmake ] || { python3 -m venv venv && venv/bin/pip install -q cmake ninja; }
. venv/bin/activate
mkdir -p sdist
TGZ=sdist/llama_cpp_python-$VER.tar.gz
if [ ! -f "$TGZ" ]; then
  URL=$(python3 - "$VER" <<'PY'
import json, sys, urllib.request, urllib.parse
j = "https://pypi.org/pypi/llama-cpp-python/json"
d = json.load(urllib.request.urlopen(j))
u = [u["url"] for u in d["releases"][sys.argv[1]] if u["packagetype"] == "sdist"][0]
print(urllib.parse.urljoin(j, u))
PY
)
  curl -sfL -o "$TGZ" "$URL"
fi
echo "$SHA  $TGZ" | sha256sum -c -
[ -d llama_cpp_python-$VER ] || tar xzf "$TGZ"
SRC=llama_cpp_python-$VER/vendor/llama.cpp
# (ggml/ alone cannot be configured from the sdist: ggml.pc.in is missing, so use the top level)
cmake -S "$SRC" -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
nice -n 10 cmake --build build -j2 --target ggml-cpu ggml-base ggml
ls -la build/bin
