#!/usr/bin/env bash
# The fuzzer over every public entry point (tools/fuzz/fuzz_sinpe.py), with sinpe's extension
# built by clang with -fsanitize=fuzzer-no-link,address,undefined, in a venv of its own:
#   tools/fuzz/run.sh [SECONDS] [VENV]        # default 60 s, a fresh venv
# Needs Debian's clang-14 and libclang-rt-14-dev, and atheris 3.0.0 from PyPI (the newest
# there).  New inputs go to a copy of tools/fuzz/corpus; a finding (a crash, a sanitizer
# report, an exception the invariant refuses) stops the run with exit 1 and the input in
# crash-*.  The last lines printed are libFuzzer's figures (executions, coverage).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
work=$(mktemp -d)
venv=${2:-$work/venv}
CC=${CC:-clang-14}
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q "setuptools>=77" "numpy>=2" ml_dtypes "torch==2.13.0" "atheris==3.0.0"
src=$work/src
mkdir -p "$src" && (cd "$root" && git ls-files -z | xargs -0 -I{} cp --parents {} "$src")
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
(cd "$src" && CC=$CC LDSHARED="$CC -shared" CFLAGS="$san -fno-omit-frame-pointer -g -O1" \
    LDFLAGS="-fsanitize=address,undefined" \
    python -m pip install -q --no-deps --no-build-isolation --force-reinstall .)
asan=$(python -c 'import atheris, os; print(os.path.join(atheris.path(), "asan_with_fuzzer.so"))')
cp -r "$root/tools/fuzz/corpus" "$work/corpus"
cd "$work"
echo "fuzz: $(python --version), $($CC --version | head -1), $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $secs s"
LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_segv=1 \
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    python "$root/tools/fuzz/fuzz_sinpe.py" "$work/corpus" -max_total_time="$secs" \
        -rss_limit_mb=12288 -timeout=120 -print_final_stats=1
