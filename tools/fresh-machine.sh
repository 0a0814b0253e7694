#!/usr/bin/env bash
# The README's two commands as a new user runs them on a fresh machine: a fresh clone of
# this repository's HEAD, a fresh virtual environment, then exactly the line after
# "<!-- main -->" and the line after "<!-- test -->" (as .ci/run reads them), with no
# Debian package beyond the base image.  Prints the time and the bytes downloaded by each
# command and pytest's summary, and fails unless the suite ends with 0 failed, 0 errors
# and nothing skipped.
#
#   tools/fresh-machine.sh                 # refuses while an extra package is installed
#   tools/fresh-machine.sh --remove-extra  # apt-get removes them first (as root)
#
# "Beyond the base image": the packages the checks outside the suite install (qemu-user,
# the aarch64 cross compiler, libmpfr-dev for tools/exhaustive, libsleef for
# tools/sleefcheck, clang for the fuzzer).  The test suite must need none of them (docs/testing.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXTRA=(libsleef-dev libsleef3 qemu-user qemu-user-static gcc-aarch64-linux-gnu
       libc6-dev-arm64-cross libmpfr-dev clang-14 libclang-rt-14-dev)

present=()
for p in "${EXTRA[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && present+=("$p")
done
if [ ${#present[@]} -gt 0 ]; then
    if [ "${1:-}" = "--remove-extra" ]; then
        echo "fresh-machine: removing ${present[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get remove -y -q "${present[@]}" >/dev/null
    else
        echo "fresh-machine: installed beyond the base image: ${present[*]} (--remove-extra removes them)" >&2
        exit 2
    fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$root" "$work/sinpe"
cd "$work/sinpe"
main=$(awk '/<!-- main -->/{getline; getline; print; exit}' README.md)
test=$(awk '/<!-- test -->/{getline; getline; print; exit}' README.md)
[ -n "$main" ] && [ -n "$test" ] || { echo "fresh-machine: README has no commands" >&2; exit 1; }

rx() {  # bytes received by every interface but loopback
    awk -F'[: ]+' 'NR > 2 && $2 != "lo" { s += $3 } END { printf "%.0f\n", s }' /proc/net/dev
}

python3 -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
export PIP_CACHE_DIR="$work/pip-cache"  # nothing from an earlier install
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
echo "fresh-machine: $(python --version), $cpu, $(nproc) CPUs, commit $(git rev-parse --short HEAD)"

for name in main test; do
    cmd=${!name}
    echo "fresh-machine [$name]: $cmd"
    t0=$(date +%s)
    b0=$(rx)
    set +e
    (eval "$cmd") > "$work/$name.log" 2>&1
    rc=$?
    set -e
    t1=$(date +%s)
    b1=$(rx)
    tail -n 3 "$work/$name.log"
    echo "fresh-machine [$name]: exit $rc, $((t1 - t0)) s, $(( (b1 - b0) / 1000000 )) MB received"
    [ $rc -eq 0 ] || { cat "$work/$name.log" | tail -n 60; exit 1; }
done

summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed)' "$work/test.log" | tail -n 1)
echo "fresh-machine: pytest: $summary"
if echo "$summary" | grep -Eq 'failed|error|skipped'; then
    echo "fresh-machine: the suite did not pass cleanly" >&2
    exit 1
fi
[ -f pe.npy ] || { echo "fresh-machine: the main command wrote no pe.npy" >&2; exit 1; }
echo "fresh-machine: ok"
