"""The backends as data: one record per backend the core registers, and what the records need.

A record says where the backend's library is (its finder, or none), whether 'auto' may pick it
(and when), the sentence numerics() gives for it, and its profiles (the SLEEF backend's torch
releases on 64-bit Arm).  ``sinpe.backends()``, the names a call may pass, the resolution of a
name and numerics() are derived from ``BACKENDS``; a test checks that every backend of the
core's registry (``_jobs.registry()``) has a record and every record a backend.  Libraries are
loaded here, once per process; a caller that needs one while another thread loads it waits.
"""
from __future__ import annotations

import os
import platform
import re
import sys
import threading
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Tuple

from .. import _jobs
from .._memo import Memo
from .mkl import DIFFERENT, EQUAL_TO_TORCH, TORCH_MKL_RELEASE, find_mkl, release, release_matches
from .torchlib import find_torch_library, torch_version

MACHINE = platform.machine().lower()
X86_64 = MACHINE in ("x86_64", "amd64")
ARM64 = MACHINE in ("aarch64", "arm64")

#: The core's registries: backend and path indices are the options' values; the names are
#: the core's one list of each (backends/backend.h, paths/path.h).
REGISTRY = _jobs.registry()
BACKEND_INDEX: Dict[str, int] = {name: i for i, name in enumerate(_jobs.BACKENDS)}
#: per backend index: 1 when a result depends on its argument alone (SLEEF's vectors couple)
INDEPENDENT = tuple(bool(b[2]) for b in REGISTRY["backends"])
PATH_NAMES: List[str] = list(_jobs.PATHS)

#: What torch on 64-bit Arm computes, per release and CPU capability (measured under qemu:
#: docs/backends.md, tests/data/torch_arm64_*.json; 0 differences in every table and thread
#: split).  name -> (torch release, capabilities, sin/cos, lanes)
PROFILES: Dict[str, Tuple[str, str, str, int]] = {
    "torch-aarch64-2.13": ("2.13", "DEFAULT (NEON) or SVE128", "SLEEF u10", 4),
    "torch-aarch64-2.13-sve256": ("2.13", "SVE256", "SLEEF u10", 8),
    "torch-aarch64-2.14": ("2.14", "DEFAULT (NEON) or SVE128", "SLEEF u10", 4),
    "torch-aarch64-2.14-sve256": ("2.14", "SVE256", "SLEEF u10", 8),
    "torch-aarch64-2.15": ("2.15", "DEFAULT (NEON) or SVE128", "SLEEF u35", 4),
    "torch-aarch64-2.15-sve256": ("2.15", "SVE256", "SLEEF u35", 8),
}
NEWEST = "torch-aarch64-2.15"


# ---- libraries ------------------------------------------------------------------------------

# What was found, loaded or why not, per library backend (process-wide, like the libraries);
# filled from the records below.
_LIB: Dict[str, Dict[str, Any]] = {}
_LOAD_LOCK = threading.Lock()


def library_info(lib: str) -> Optional[Dict[str, Any]]:
    """The core's view of a library backend: None until it is loaded."""
    return _jobs.backend_info(BACKEND_INDEX[lib])


def load(lib: str) -> bool:
    """Loads a backend's library once per process (its record's finder says where); records
    the path or the reason it cannot be used.  Every caller waits for a load under way (the
    core's load releases the GIL)."""
    if library_info(lib) is not None:
        return True
    state = _LIB[lib]
    with _LOAD_LOCK:
        if library_info(lib) is not None:
            return True
        if state["tried"]:
            return False
        path, reason = BY_NAME[lib].finder()  # type: ignore[misc]
        if path is None:
            state["reason"] = reason
        else:
            try:
                _jobs.load(BACKEND_INDEX[lib], path)
                state["path"], state["reason"] = path, ""
            except OSError as exc:
                state["reason"] = f"{path}: {exc}"
        state["tried"] = True
        return library_info(lib) is not None


def reason(lib: str) -> str:
    """Why a library backend is not loaded ('' once it is)."""
    return str(_LIB[lib]["reason"])


def library_path(lib: str) -> Optional[str]:
    """The file a library backend was loaded from (None before)."""
    path = _LIB[lib]["path"]
    return None if path is None else str(path)


def mkl_equal() -> bool:
    """The mkl wheel's library is loaded and its release is one measured equal to torch's."""
    info = library_info("mkl")
    return info is not None and release_matches(info["version"])


# ---- torch on 64-bit Arm ------------------------------------------------------------------

def physical_cores() -> int:
    """torch's default thread count: the physical cores (at::get_num_physical_cores)."""
    cores = set()
    try:
        base = "/sys/devices/system/cpu"
        for cpu in os.listdir(base):
            topo = os.path.join(base, cpu, "topology")
            if cpu.startswith("cpu") and cpu[3:].isdigit() and os.path.isdir(topo):
                with open(os.path.join(topo, "core_id")) as f:
                    core = f.read().strip()
                pkg_path = os.path.join(topo, "physical_package_id")
                pkg = open(pkg_path).read().strip() if os.path.exists(pkg_path) else "0"
                cores.add((pkg, core))
    except OSError:
        cores = set()
    return len(cores) or os.cpu_count() or 1


def torch_profile() -> Tuple[str, int, str]:
    """(profile, torch threads, note) of what torch on 64-bit Arm computes here: the imported
    torch's version, capability and thread count, else the newest measured torch."""
    mod = sys.modules.get("torch")
    if mod is None:
        return NEWEST, physical_cores(), (f"torch is not imported: the newest torch measured "
                                          f"({PROFILES[NEWEST][0]}) at its default threads")
    version = str(getattr(mod, "__version__", "0.0"))
    try:
        major, minor = (int(v) for v in _release_of(version).split("."))
    except ValueError:
        major, minor = 0, 0
    # the newest measured release not newer than this torch (the oldest for older ones)
    measured = sorted({tuple(int(v) for v in p[0].split(".")) for p in PROFILES.values()})
    known = [r for r in measured if r <= (major, minor)]
    rel = known[-1] if known else measured[0]
    release_txt = f"{rel[0]}.{rel[1]}"
    note = "" if rel == (major, minor) else (
        f"torch {version} was not measured: using the {release_txt} profile")
    try:
        sve256 = mod.backends.cpu.get_cpu_capability() == "SVE256"
        threads = int(mod.get_num_threads())
    except Exception:
        sve256, threads = False, physical_cores()
    name = f"torch-aarch64-{release_txt}" + ("-sve256" if sve256 else "")
    return name, threads, note


def torch_unmeasured() -> Optional[Tuple[Any, str]]:
    """(key, warning) when the imported torch's release has no measured 64-bit Arm profile
    (the nearest measured one is used); None when it has one or torch is not imported."""
    mod = sys.modules.get("torch")
    if mod is None:
        return None
    profile, _, note = torch_profile()
    if not note:
        return None
    version = str(getattr(mod, "__version__", "?"))
    return ("torch", version), (
        f"backend 'sleef': torch {version} is imported, whose release has no measured profile "
        f"on 64-bit Arm; using the {profile} profile (torch {PROFILES[profile][0]}'s bits, "
        f"which can differ from torch {version}'s)")


# ---- the frameworks on x86-64 -----------------------------------------------------------------

#: The frameworks' measured releases (docs/backends.md; tests/data/frameworks.json): profile ->
#: (the releases measured to give its bits, newest last: the profile is named after it; the
#: distributions whose version says which release is installed; what it runs; its variant,
#: the core's backend option 'trig' for a framework: NumPy 1.26/2.0 1 (their older sin and
#: cos); JAX 0.8 1 (no glibc tail in a short
#: exp), 0.5 to 0.7 2 (two glibc elements in some long rows); TensorFlow 2.15 to 2.19 1 (the
#: older Eigen pow).  The newest profile of a framework is its last.
FRAMEWORKS: Dict[str, Dict[str, Tuple[str, str, str, int]]] = {
    "numpy": {"numpy-2.0": ("1.26 2.0", "numpy", "NumPy 1.26/2.0's float32 exp/sin/cos SIMD "
                            "loops (sin/cos: the quadrant in two roundings, a NaN through "
                            "glibc); pow by the installed NumPy itself", 1),
              "numpy-2.4": ("2.1 2.2 2.3 2.4", "numpy", "NumPy's float32 exp/sin/cos SIMD loops "
                            "(AVX2 or AVX-512: the same bits); pow by the installed NumPy itself "
                            "(np.power: Intel SVML's on AVX-512 CPUs, the C library's powf "
                            "elsewhere)", 0)},
    "tensorflow": {"tensorflow-2.19": ("2.15 2.16 2.17 2.18 2.19", "tensorflow tensorflow-cpu "
                                       "tensorflow-intel intel-tensorflow tensorflow-macos "
                                       "tensorflow-rocm tf-nightly tf-nightly-cpu",
                                       "Eigen's exp/sin/cos under FTZ/DAZ and its pow of "
                                       "2024 (an older log2 and 2^r), the last n % 8 elements "
                                       "of each op through glibc (flushed)", 1),
                   "tensorflow-2.21": ("2.20 2.21", "tensorflow tensorflow-cpu tensorflow-intel "
                                       "intel-tensorflow tensorflow-macos tensorflow-rocm "
                                       "tf-nightly tf-nightly-cpu",
                                       "Eigen's exp/sin/cos/pow under FTZ/DAZ, the last n % 8 "
                                       "elements of each op through glibc (flushed)", 0)},
    "jax": {"jax-0.7": ("0.5 0.6 0.7", "jaxlib jax", "XLA's exp (FTZ/DAZ) but two elements "
                        "of each row of m >= 66 elements with m % 32 = 2 or 3 through glibc, "
                        "glibc's sinf/cosf, glibc's powf under FTZ/DAZ", 2),
            "jax-0.8": ("0.8", "jaxlib jax", "XLA's exp (FTZ/DAZ) for every "
                        "element, glibc's sinf/cosf, glibc's powf under FTZ/DAZ", 1),
            "jax-0.10": ("0.9 0.10", "jaxlib jax", "XLA's exp (FTZ/DAZ), glibc's sinf/cosf, "
                         "glibc's powf under FTZ/DAZ", 0)},
    "onnxruntime": {"onnxruntime-1.32": (" ".join(f"1.{m}" for m in range(18, 33)),
                                         "onnxruntime onnxruntime-gpu "
                                         "onnxruntime-directml onnxruntime-openvino "
                                         "onnxruntime-training ort-nightly",
                                         "MLAS exp, Eigen sin/cos with the last n % 4 elements "
                                         "of each op through glibc, glibc's powf", 0)},
    "mlx": {"mlx-0.32": ("0.32", "mlx mlx-cpu", "MLX's own exp/sin/cos of its CPU build (sin/cos "
                         "of |x| > 2^23 through glibc), glibc's powf", 0)},
}

#: Releases measured to differ from every profile, and how (said with the warning that names
#: the profile used instead): (framework, major.minor) -> the difference.
DIFFERS: Dict[Tuple[str, str], str] = {
    ("jax", "0.4"): "measured: JAX 0.4.35 gives jax-0.8's bits (backend='jax-0.8'), 0.4.30 "
                    "sends other elements of an exp of a short vector to glibc",
}


def releases(profile_record: Tuple[str, str, str, int]) -> List[str]:
    """The releases a profile stands for (measured), oldest first."""
    return profile_record[0].split()


def newest(profile_record: Tuple[str, str, str, int]) -> str:
    """The newest release a profile stands for (its name's)."""
    return releases(profile_record)[-1]


#: The frameworks as their projects write them (messages).
TITLES: Dict[str, str] = {"numpy": "NumPy", "tensorflow": "TensorFlow", "jax": "JAX",
                          "onnxruntime": "ONNX Runtime", "mlx": "MLX"}


def _installed(dists: str) -> Optional[str]:
    """The version of the first of these distributions that is installed (never imported)."""
    from importlib import metadata
    for dist in dists.split():
        try:
            return str(metadata.version(dist))
        except Exception:  # not installed, or broken metadata
            continue
    return None


#: The frameworks' installed releases, read once per process (a read costs about 0.2 ms: the
#: metadata's files are searched on sys.path).  The key holds the lookups themselves, so a
#: replaced one (a test's monkeypatch) is read afresh.
_RELEASES: Memo[Any, Optional[str]] = Memo(16)


def installed_release(framework: str) -> Optional[str]:
    """The installed version of a framework (None if it is not installed)."""
    from importlib import metadata
    dists = list(FRAMEWORKS[framework].values())[-1][1]
    key = (dists, _installed, metadata.version)
    try:
        return _RELEASES[key]
    except KeyError:  # (not read yet, or forgotten by clear_cache meanwhile)
        r = _RELEASES[key] = _installed(dists)
        return r


def _release_of(version: str) -> str:
    """'2.4.6' -> '2.4' (a profile's release is major.minor), read as PEP 440 spells a
    version: '2.4rc1', '2.4.0rc1', '2.4.dev0' and '1!2.4.1+local' are releases of 2.4 too."""
    m = _RELEASE.match(version.strip())
    if m is None:
        return version
    return f"{int(m.group(1))}.{int(m.group(2) or 0)}"


#: a PEP 440 version's epoch, major and minor (what follows them is ignored)
_RELEASE = re.compile(r"v?(?:\d+!)?(\d+)(?:\.(\d+))?")


def _final_release(version: str) -> Optional[str]:
    """A PEP 440 version's release as a profile names it ('2.4.6', '2.4.post1', '2.4.6+cpu'
    -> '2.4'), or None for a version that is no final release of epoch 0 (a pre-release or a
    development build: code from before the release measured; another epoch; no version)."""
    m = _PEP440.match(version.strip())
    if m is None or (m.group("epoch") or "0") != "0" or m.group("pre") or m.group("dev"):
        return None
    return f"{int(m.group('major'))}.{int(m.group('minor') or 0)}"


#: a PEP 440 version (case and separators as the specification allows)
_PEP440 = re.compile(
    r"^v?(?:(?P<epoch>\d+)!)?(?P<major>\d+)(?:\.(?P<minor>\d+))?(?:\.\d+)*"
    r"(?P<pre>[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)[-_.]?\d*)?"
    r"(?:-\d+|[-_.]?(?:post|rev|r)[-_.]?\d*)?"
    r"(?P<dev>[-_.]?dev[-_.]?\d*)?(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$", re.IGNORECASE)


def framework_release(framework: str) -> Tuple[str, Optional[str], bool]:
    """(the profile the framework's plain name means, the installed version or None, whether
    that version is a final release whose major.minor has a measured profile): the
    installed release's profile, else the newest measured."""
    profiles = FRAMEWORKS[framework]
    version = installed_release(framework)
    if version is not None:
        release = _final_release(version)
        for name, p in profiles.items():
            if release is not None and release in releases(p):
                return name, version, True
    return list(profiles)[-1], version, False


def framework_profile(framework: str) -> Tuple[str, int, str]:
    """(profile, 0, note): the installed release's profile when the framework is installed
    and measured, else the newest measured; the note says which (numerics())."""
    profile, version, measured = framework_release(framework)
    rel, title = newest(FRAMEWORKS[framework][profile]), TITLES[framework]
    if version is None:
        return profile, 0, f"{framework} is not installed: the newest release measured ({rel})"
    if measured:
        return profile, 0, f"the installed {framework} {version}"
    return profile, 0, (f"{title} {version} is installed, whose release has no measured "
                        f"profile: these are {title} {rel}'s bits, which can differ from "
                        f"{title} {version}'s" + _differs(framework, version))


def framework_unmeasured(framework: str) -> Optional[Tuple[Any, str]]:
    """(key, warning) when the framework's plain name stands for another release than the
    installed one (installed, not measured); None otherwise."""
    profile, version, measured = framework_release(framework)
    if version is None or measured:
        return None
    rel, title = newest(FRAMEWORKS[framework][profile]), TITLES[framework]
    return (framework, version), (
        f"backend {framework!r}: {title} {version} is installed, whose release has no measured "
        f"profile; using the {profile} profile ({title} {rel}'s bits, which can differ from "
        f"{title} {version}'s{_differs(framework, version)})")


def _differs(framework: str, version: str) -> str:
    """'; measured: how' for a release measured to differ from every profile, else ''."""
    release = _final_release(version)
    how = DIFFERS.get((framework, release)) if release is not None else None
    return f"; {how}" if how else ""


def _framework_sentence(name: str, torch_threads: Optional[int]) -> str:
    fw = BY_PROFILE[name].name if name in BY_PROFILE else name
    profile, _, note = framework_profile(fw)
    if name in BY_PROFILE:
        profile, note = name, "chosen by name"
    rels = releases(FRAMEWORKS[fw][profile])
    what = FRAMEWORKS[fw][profile][2]
    rel = rels[0] if len(rels) == 1 else f"{rels[0]} to {rels[-1]}"
    return (f"{fw} {rel} on x86-64 CPUs, bit for bit ({profile}: {note}): {what}, applied to the "
            f"same float32 operations; the same bits on any machine"
            + (" but pow's, which are this machine's NumPy's" if fw == "numpy" else ""))


# ---- whose bits each backend gives (numerics()'s sentence) ----------------------------------

def _cpu() -> str:
    f = REGISTRY["cpu"]
    isa = "AVX-512" if f.get("avx512f") else "AVX2" if f.get("avx2") else "SSE"
    return f"{f.get('vendor', '?')} CPU with {isa}"


def _builtin_sentence(name: str, torch_threads: Optional[int]) -> str:
    return ("correctly rounded float32 exp/sin/cos (round to nearest, every input): the same "
            "bits on every machine; equal to torch's where torch's results are correctly "
            "rounded (about 95% of values)")


def _sleef_sentence(name: str, torch_threads: Optional[int]) -> str:
    profile, threads, note = torch_profile()
    torch_release, caps, trig, lanes = PROFILES[name if name in PROFILES else profile]
    threads = torch_threads or threads
    return (f"torch {torch_release} on 64-bit Arm ({caps}: {trig} sin/cos, SLEEF u10 exp, "
            f"{lanes}-lane vectors) with {threads} torch thread{'s' if threads != 1 else ''} "
            "(or torch_threads=), bit for bit: the bits depend on torch's release, CPU "
            "capability and thread count (torch.set_num_threads changes them)"
            + (f"; {note}" if note else ""))


def _vml_sentence(name: str, torch_threads: Optional[int]) -> str:
    info = library_info(name)
    version = str(info["version"]) if info else "not loaded"
    rel = release(version)
    rel_txt = f"{rel[0]}.{rel[1]}" if rel else version
    where = (f"on this {_cpu()}: oneMKL chooses its code path by CPU (Intel AVX-512 and AVX2-only "
             "CPUs give different bits, and so do MKL_ENABLE_INSTRUCTIONS or MKL_CBWR there), and "
             "sinpe follows torch because both run the same oneMKL on the same CPU")
    if name == "torch":
        return (f"torch {torch_version() or '?'} on x86-64, bit for bit: the oneMKL {rel_txt} VML "
                f"inside the torch in this environment ({library_path('torch')}), {where}")
    if rel in EQUAL_TO_TORCH:
        return (f"torch's x86-64 wheels (1.13 to 2.15, oneMKL {TORCH_MKL_RELEASE} inside), bit "
                f"for bit: oneMKL {rel_txt} from the mkl wheel is measured equal to that copy "
                f"({EQUAL_TO_TORCH[rel]}), {where}")
    return (f"not torch's bits: oneMKL {rel_txt} from the mkl wheel ({version}) is not a release "
            f"measured equal to torch's copy: {DIFFERENT}")


# ---- the records ------------------------------------------------------------------------------

class Record(NamedTuple):
    """One backend of the core's registry, as the package sees it."""
    name: str  # the core's name for it (_jobs.registry())
    finder: Optional[Callable[[], Tuple[Optional[str], str]]]  # its library: (path, why not)
    library: str  # what its library is called in messages (with a finder)
    auto: Optional[Callable[[], bool]]  # None: 'auto' never picks it; else when it does
    available: Callable[[], bool]  # usable in this process (sinpe.backends())
    sentence: Callable[[str, Optional[int]], str]  # whose bits it gives (numerics())
    profiles: Dict[str, Tuple[str, str, str, int]]  # names that select it with a profile
    #: what its plain name means now: (profile, torch threads, note); None: itself
    profile_of: Optional[Callable[[], Tuple[str, int, str]]] = None
    #: (key, warning) when that profile stands for an installed (or imported) release that
    #: was not measured, else None: the plain name warns once per key (policy.resolve)
    unmeasured: Optional[Callable[[], Optional[Tuple[Any, str]]]] = None


def _torch_usable() -> bool:
    """torch's library counts when it is loaded, or found and not known to fail (torch's
    oneMKL: x86-64 builds only)."""
    return library_info("torch") is not None or (
        X86_64 and not _LIB["torch"]["tried"] and find_torch_library()[0] is not None)


#: Every backend, in the order 'auto' tries them (the first whose auto() holds is taken).
BACKENDS: Tuple[Record, ...] = (
    Record("sleef", None, "", lambda: ARM64, lambda: True, _sleef_sentence, PROFILES,
           torch_profile, torch_unmeasured),
    Record("torch", find_torch_library, "torch's library",
           lambda: X86_64 and "torch" in sys.modules and load("torch"), _torch_usable,
           _vml_sentence, {}),
    Record("mkl", find_mkl, "oneMKL", lambda: X86_64 and mkl_equal(),
           lambda: library_info("mkl") is not None, _vml_sentence, {}),
    # the frameworks: never 'auto' (their bits are asked for by name)
    *(Record(fw, None, "", None, lambda: True, _framework_sentence, FRAMEWORKS[fw],
             lambda fw=fw: framework_profile(fw),  # type: ignore[misc]
             lambda fw=fw: framework_unmeasured(fw))  # type: ignore[misc]
      for fw in FRAMEWORKS),
    Record("builtin", None, "", lambda: True, lambda: True, _builtin_sentence, {}),
)
BY_NAME: Dict[str, Record] = {r.name: r for r in BACKENDS}
#: a profile's name -> its backend's record
BY_PROFILE: Dict[str, Record] = {p: r for r in BACKENDS for p in r.profiles}
_LIB.update({r.name: {"path": None, "reason": f"{r.library} was not looked for", "tried": False}
             for r in BACKENDS if r.finder is not None})

#: Names a call can pass as backend= (besides 'auto'): the core's order, then the profiles.
NAMES: List[str] = sorted(BY_NAME, key=lambda n: BACKEND_INDEX.get(n, len(BY_NAME))) \
    + list(BY_PROFILE)
