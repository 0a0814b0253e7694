#!/bin/bash
# Runs sinpe's test suite on 64-bit Arm under qemu-user: an aarch64 Python with real aarch64
# torch (set up beforehand in $P, see below), sinpe cross-compiled with Debian's
# aarch64-linux-gnu-gcc, the test extras' aarch64 wheels from PyPI.  binfmt_misc is mounted
# and qemu-aarch64 registered so that the suite's own subprocesses (CLI, notebook kernel,
# DataLoader workers) run as aarch64 too.  Needs root (binfmt), qemu-user,
# gcc-aarch64-linux-gnu, about 1.5 GB of wheels; takes about an hour (everything is
# emulated).  $P must hold, set up once: an aarch64 Python 3.11 in $P/sysroot (a sysroot
# with Debian's arm64 packages unpacked by dpkg-deb -x, their .debs in $P/debs, and a fake
# aarch64 /proc/cpuinfo, since qemu-user 7.2 passes the host's through and torch's cpuinfo
# crashes on it), and torch's aarch64 wheels (torch, NumPy and the nvidia-* CUDA wheels it
# links) unpacked into $P/site; qemu-user installed (docs/numerics.md).  Usage:
#   P=~/.cache/sinpe-arm64 tools/arm64-suite.sh [pytest arguments]
# The tests marked x86_64 (x86-64's oneMKL and torch's x86 SLEEF exports) and the sanitizer driver
# (x86 valgrind and ASan) are deselected; docs/testing.md lists them.
set -euo pipefail
P=${P:-$HOME/.cache/sinpe-arm64}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SYS=$P/sysroot
T=$P/suite
mkdir -p "$T/wheels" "$T/site" "$T/bin"
PLAT="--platform manylinux_2_28_aarch64 --platform manylinux_2_27_aarch64 --platform manylinux_2_17_aarch64 --platform manylinux2014_aarch64 --platform linux_aarch64"

# 1. the Python headers for aarch64 (Debian's libpython3.11-dev:arm64, unpacked, not installed)
if [ ! -e "$SYS/usr/include/aarch64-linux-gnu/python3.11/pyconfig.h" ]; then
    (cd "$P/debs" && apt-get download libpython3.11-dev:arm64 && dpkg-deb -x libpython3.11-dev_*_arm64.deb "$SYS")
fi
# 2. the test extras for aarch64 (torch comes from $P/site)
EXTRAS="pytest hypothesis mpmath ml_dtypes matplotlib nbclient nbformat ipykernel ipywidgets mypy numpy==2.4.6"
if [ "$(cat "$T/site/.done" 2>/dev/null)" != "$EXTRAS" ]; then
    PIP_CONFIG_FILE=/dev/null pip download -q --only-binary=:all: --python-version 3.11 $PLAT -d "$T/wheels" $EXTRAS
    for w in "$T/wheels"/*.whl; do unzip -q -o "$w" -d "$T/site"; done
    echo "$EXTRAS" > "$T/site/.done"
fi
# 3. sinpe, cross-compiled as setup.py would build it
NP=$(ls -d "$T"/site/numpy/_core/include)
rm -rf "$T/site/sinpe" && cp -r "$ROOT/sinpe" "$T/site/sinpe"
SRCS="$ROOT/src/binding/*.c $(grep -v '^#' "$ROOT/src/sources.txt" | sed "s|^|$ROOT/src/|")"
aarch64-linux-gnu-gcc -shared -fPIC -O2 -ffp-contract=off -fno-fast-math -Wall -Wextra \
    -I"$SYS/usr/include" -I"$SYS/usr/include/python3.11" -I"$NP" \
    -I"$ROOT/src" -I"$ROOT/src/include" $SRCS -lm -ldl -lpthread -o "$T/site/sinpe/_sinpe.cpython-311-aarch64-linux-gnu.so"
# gcc inside the suite (the odd buffer exporters) must build aarch64 extensions
cat > "$T/bin/gcc" <<EOS
#!/bin/bash
# the emulated Python names its headers /usr/include/...: they are in the sysroot
args=()
for a in "\$@"; do case "\$a" in -I/usr/include*) args+=("-I$SYS\${a#-I}");; *) args+=("\$a");; esac; done
exec aarch64-linux-gnu-gcc -I$SYS/usr/include "\${args[@]}"
EOS
chmod +x "$T/bin/gcc"
# 4. aarch64 binaries run through qemu, subprocesses included
[ -e /proc/sys/fs/binfmt_misc/register ] || mount binfmt_misc -t binfmt_misc /proc/sys/fs/binfmt_misc
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || echo ':qemu-aarch64:M::\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00:\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff:/usr/bin/qemu-aarch64:' > /proc/sys/fs/binfmt_misc/register
mkdir -p "$T/py" && ln -sf "$SYS/usr/bin/python3.11" "$T/py/python3" && ln -sf "$SYS/usr/bin/python3.11" "$T/py/python"
cd "$ROOT/tests"
export QEMU_LD_PREFIX=$SYS QEMU_CPU=${QEMU_CPU:-neoverse-n1}
export PYTHONPATH=$T/site:$P/site PATH=$T/bin:$T/py:$PATH
export SINPE_TEST_TIME_SCALE=${SINPE_TEST_TIME_SCALE:-40}
# Deselected here, not on real Arm: the sanitizer runs (x86 valgrind and ASan), torch.compile
# (inductor needs a C++ compiler inside the emulated system) and DataLoader workers by fork
# (qemu-user 7.2 aborts forking a threaded process: "cpu_exec: assertion failed").
exec "$SYS/usr/bin/python3.11" -m pytest -p no:cacheprovider -m "not x86_64 and not slow and not dist and not oracle_packages" \
    --deselect tests/c/test_c_core.py --deselect tests/api/test_api_torch_module.py::test_torch_compile \
    --deselect "tests/robustness/test_robust_runtime.py::test_torch_dataloader_workers[fork]" "$@"
