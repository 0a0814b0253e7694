#!/usr/bin/env bash
# The fuzzer of sinpe's torch wing (tools/fuzz/fuzz_torch.py: the rotation forms against
# transformers' own functions, patch state sequences on tiny models, messages, framework
# aliases), with sinpe's extension built by clang with
# -fsanitize=fuzzer-no-link,address,undefined, in a venv of its own:
#   tools/fuzz/run_torch.sh [SECONDS] [VENV]      # default 300 s, a fresh venv
# Needs Debian's clang-14 and libclang-rt-14-dev (installed with apt-get when missing and
# this runs as root), and from PyPI torch 2.13.0, transformers 5.24.0 and atheris 3.0.0.
# The tree built is the working tree (tracked and untracked files, .gitignore's excluded).
# New inputs go to a copy of tools/fuzz/corpus_torch in a temporary work dir; a finding (an
# invariant violated, a crash, a sanitizer report) stops the run with a nonzero exit (77 for
# a Python exception), its input in the work dir's crash-* and the case as JSON on the log
# ("case: {...}"; the corpus's finding_*.json cases stop it until they are fixed).  With SINPE_FUZZ_FINDINGS=FILE a finding is appended to
# FILE (one JSON line: the case and what differs) and the run goes on (a campaign that
# collects every class at once).  The last lines printed are libFuzzer's figures
# (executions, coverage, peak memory).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-300}
work=$(mktemp -d)
venv=${2:-$work/venv}
CC=${CC:-clang-14}
if ! command -v "$CC" >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.a \
        >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -q clang-14 libclang-rt-14-dev >/dev/null
    else
        echo "run_torch.sh: needs Debian's clang-14 and libclang-rt-14-dev" >&2
        exit 2
    fi
fi
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
# shellcheck disable=SC1091
. "$venv/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q "setuptools>=77" "numpy>=2" ml_dtypes packaging "torch==2.13.0" \
    "transformers==5.24.0" "atheris==3.0.0"
src=$work/src
mkdir -p "$src"
(cd "$root" && git ls-files -z --cached --others --exclude-standard \
    | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src"
san="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
(cd "$src" && CC=$CC LDSHARED="$CC -shared" CFLAGS="$san -fno-omit-frame-pointer -g -O1" \
    LDFLAGS="-fsanitize=address,undefined" \
    python -m pip install -q --no-deps --no-build-isolation --force-reinstall .)
asan=$(python -c 'import atheris, os; print(os.path.join(atheris.path(), "asan_with_fuzzer.so"))')
cp -r "$root/tools/fuzz/corpus_torch" "$work/corpus_torch"
cd "$work"
echo "fuzz_torch: $(python --version), torch $(python -c 'import torch; print(torch.__version__)'),"\
" transformers $(python -c 'import transformers; print(transformers.__version__)'),"\
" $($CC --version | head -1), $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo),"\
" $(nproc) cores, $secs s, work dir $work"
TIMEFORMAT="fuzz_torch: %R s wall, %U s user CPU, %S s system CPU"
set +e
time (LD_PRELOAD="$asan" ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_segv=1 \
    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    python "$src/tools/fuzz/fuzz_torch.py" "$work/corpus_torch" -max_total_time="$secs" \
        -rss_limit_mb=12288 -timeout=300 -print_final_stats=1 2>&1 | tee "$work/fuzz.log")
rc=$?  # (pipefail: the fuzzer's status, not tee's)
set -e
echo "fuzz_torch: log $work/fuzz.log, new inputs in $work/corpus_torch"
exit "$rc"
