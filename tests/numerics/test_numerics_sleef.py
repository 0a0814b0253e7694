"""The 'sleef' backend: torch on 64-bit Arm, bit for bit (issue 9).

Two oracles, both required: SLEEF itself as the installed torch exports it (libtorch_cpu's
Sleef_*f8_*avx2 and Sleef_*f16_*avx512f, driven with torch's grouping by
tests/c/sleef_oracle.c), and real aarch64 torch 2.13, 2.14 and 2.15 run under qemu, whose
tables' SHA-256 digests tools/arm64_oracle.py wrote to tests/data/torch_arm64_*.json.
(Debian's libsleef is a third, outside the suite: tools/sleefcheck, docs/testing.md.)"""
import hashlib
import json
import math
import os

import numpy as np
import pytest

import sinpe
from conftest import ROOT, TESTS, same
from sinpe._jobs import _round  # the rounding the tables use, private to sinpe
PROFILES = {"torch-aarch64-2.13": (0, 4), "torch-aarch64-2.13-sve256": (0, 8),
            "torch-aarch64-2.14": (0, 4), "torch-aarch64-2.14-sve256": (0, 8),
            "torch-aarch64-2.15": (1, 4), "torch-aarch64-2.15-sve256": (1, 8)}
SHAPES = [(4096, 512), (333, 96), (4095, 510), (20001, 66), (333, 98), (2049, 34), (77, 6),
          (1, 2), (0, 8), (3, 8194)]


def mixed(n, seed):
    rng = np.random.default_rng(seed)
    parts = [rng.uniform(-5000, 5000, n), rng.uniform(-130, 130, n), rng.uniform(38990, 39010, n // 4),
             rng.uniform(-1e7, 1e7, n // 4), np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 125, -125,
                                                         124.99999, 39000, 38999.996, 1e30, 1e-40])]
    x = np.concatenate(parts).astype(np.float32)
    rng.shuffle(x)
    return x


#: The vector widths of SLEEF's x86 exports this CPU runs (16: AVX-512F).
WIDTHS = [8] + ([16] if sinpe._policy.cpu_features().get("avx512f") else [])


@pytest.mark.x86_64  # the oracle: torch's x86-64 exports of SLEEF
@pytest.mark.needs_torch
@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_elementwise_equals_sleef(profile, threads, sleef_oracle):
    u35, lanes = PROFILES[profile]
    x = mixed(60_000, threads)
    for func in ("sin", "cos"):
        got = sinpe.elementwise(func, x, backend=profile, torch_threads=threads)
        assert same(got, sleef_oracle(func, u35, lanes, threads, x)), func
    e = np.clip(x, -110, 110)
    assert same(sinpe.elementwise("exp", e, backend=profile, torch_threads=threads),
                     sleef_oracle("exp", u35, lanes, threads, e))


@pytest.mark.x86_64
@pytest.mark.needs_torch
@pytest.mark.parametrize("width", WIDTHS)
def test_the_sleef_oracle_serves_every_lane_count(width, sleef_oracle):
    """The oracle's 8- and 16-lane calls give the 4- and 8-lane vectors' bits: a group is
    copied into every part of the wider vector, so one lane past a reduction threshold sends
    only its own group down the long path.  Inputs where that decides the bits: a 4-lane
    group of small angles next to a group holding 1000 (u10) or 125 / 39000 (u35); sinpe's
    profiles, whose path choice is per group, must agree with the oracle on both widths, and
    the 4-lane and 8-lane results must differ on some of these inputs (else the test shows
    nothing)."""
    assert width in sleef_oracle.widths, sleef_oracle.widths
    rng = np.random.default_rng(11)
    small = rng.uniform(-120, 120, 4096).astype(np.float32)
    for u35, fillers in ((0, (1000.0,)), (1, (125.0, 39000.0))):
        for fill in fillers:
            x = small.copy()
            x[4::8] = fill  # one lane of every second 4-lane group; every 8-lane group
            differ = 0
            for lanes in (4, 8):
                profile = f"torch-aarch64-{'2.15' if u35 else '2.13'}" + ("-sve256" if lanes == 8 else "")
                for func in ("sin", "cos"):
                    want = sleef_oracle(func, u35, lanes, 1, x, width=width)
                    assert same(sinpe.elementwise(func, x, backend=profile, torch_threads=1),
                                     want), (u35, fill, lanes, func)
            for func in ("sin", "cos"):
                a = sleef_oracle(func, u35, 4, 1, x, width=width).view(np.uint32)
                b = sleef_oracle(func, u35, 8, 1, x, width=width).view(np.uint32)
                differ += int(np.count_nonzero(a != b))
            assert differ > 0, (u35, fill)
    if len(sleef_oracle.widths) > 1:  # the two widths of the library agree
        x = mixed(20_000, 5)
        for func in ("sin", "cos"):
            for u35 in (0, 1):
                assert same(sleef_oracle(func, u35, 4, 3, x, width=8),
                                 sleef_oracle(func, u35, 4, 3, x, width=16)), (func, u35)


def oracle_table(oracle, profile, L, d, base, threads, positions=None):
    """The reference module's table as torch on aarch64 builds it, through SLEEF itself."""
    u35, lanes = PROFILES[profile]
    c = np.float32(-math.log(base) / d)
    div = oracle("exp", u35, lanes, threads, np.arange(0, d, 2).astype(np.float32) * c)
    pos = np.arange(L, dtype=np.float32) if positions is None else np.asarray(positions, np.float32)
    ang = (pos.reshape(-1)[:, None] * div[None, :]).astype(np.float32)
    pe = np.empty((ang.shape[0], d), np.float32)
    pe[:, 0::2] = oracle("sin", u35, lanes, threads, ang.ravel()).reshape(ang.shape)
    pe[:, 1::2] = oracle("cos", u35, lanes, threads, ang.ravel()).reshape(ang.shape)
    return pe.reshape(pos.shape + (d,))


@pytest.mark.x86_64  # the oracle: torch's x86-64 exports of SLEEF
@pytest.mark.needs_torch
@pytest.mark.parametrize("profile", sorted(PROFILES))
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_tables_equal_sleef_with_torch_chunking(profile, threads, sleef_oracle, kernel):
    for (L, d) in SHAPES:
        for base in (10000.0, 500000.0):
            want = oracle_table(sleef_oracle, profile, L, d, base, threads)
            got = sinpe.positional_encoding(L, d, base, backend=profile, torch_threads=threads)
            assert same(got, want), (L, d, base)


@pytest.mark.x86_64  # the oracle: torch's x86-64 exports of SLEEF
@pytest.mark.needs_torch
@pytest.mark.parametrize("profile", ["torch-aarch64-2.13", "torch-aarch64-2.15-sve256"])
def test_positions_dtypes_add_pe_and_layouts(profile, sleef_oracle):
    u35, lanes = PROFILES[profile]
    p = np.random.default_rng(3).integers(-40000, 40000, (7, 33))
    want = oracle_table(sleef_oracle, profile, 0, 64, 10000.0, 2, positions=p)
    assert same(sinpe.positional_encoding(d_model=64, positions=p, backend=profile,
                                               torch_threads=2), want)
    # the rows of the reference module's table (max_len 5000 by default), added in place
    table = oracle_table(sleef_oracle, profile, 5000, 510, 10000.0, 2)
    x = np.random.default_rng(4).standard_normal((3, 200, 510)).astype(np.float32)
    y = x.copy()
    sinpe.add_pe(y, offset=4700, backend=profile, torch_threads=2)
    assert same(y, x + table[4700:4900])
    big = oracle_table(sleef_oracle, profile, 9001, 510, 10000.0, 3)
    y = x.copy()
    sinpe.add_pe(y, offset=4700, max_len=9001, backend=profile, torch_threads=3)
    assert same(y, x + big[4700:4900])
    # other dtypes and a strided out: rounded from the same float32 values
    out = np.zeros((510, 5000), np.float16).T
    sinpe.positional_encoding(5000, 510, out=out, backend=profile, torch_threads=2)
    assert np.array_equal(out.view(np.uint16), _round(table.ravel(), "float16").reshape(
        5000, 510).view(np.uint16))
    with pytest.raises(ValueError, match="max_len=10 is smaller than offset"):
        sinpe.add_pe(x, offset=4700, max_len=10, backend=profile)
    with pytest.raises(ValueError, match="torch_threads must be between 1 and 4096, got 0"):
        sinpe.positional_encoding(4, 8, backend=profile, torch_threads=0)


def _oracle_files():
    return sorted(f for f in os.listdir(os.path.join(TESTS, "data")) if f.startswith("torch_arm64_"))


def test_real_aarch64_torch_digests_are_present():
    names = _oracle_files()
    for release in ("2.13", "2.14", "2.15"):
        assert sum(release in n for n in names) == 3, names  # DEFAULT, SVE128, SVE256


@pytest.mark.parametrize("name", _oracle_files())
def test_real_aarch64_torch_tables(name):
    """Every table and elementwise result real torch on aarch64 (under qemu) computed, at each
    thread count, has the digest of sinpe's profile for that torch and capability."""
    with open(os.path.join(TESTS, "data", name)) as f:
        data = json.load(f)
    release = ".".join(data["torch"].split(".")[:2])
    profile = f"torch-aarch64-{release}" + ("-sve256" if data["capability"] == "SVE256" else "")

    def digest(a):
        return hashlib.sha256(np.ascontiguousarray(a).view(np.uint32).tobytes()).hexdigest()
    bad = []
    for key, want in data["tables"].items():
        shape, rest = key.split("@")
        base, t = rest.split("/t")
        L, d = map(int, shape.split("x"))
        got = sinpe.positional_encoding(L, d, float(base), backend=profile, torch_threads=int(t))
        if digest(got) != want:
            bad.append(key)
    x = arm64_oracle_inputs()
    e = np.random.default_rng(7).uniform(-14, 0, 500_000).astype(np.float32)
    for key, want in data["elementwise"].items():
        func, t = key.split("/t")
        got = sinpe.elementwise(func, e if func == "exp" else x, backend=profile, torch_threads=int(t))
        if digest(got) != want:
            bad.append(key)
    assert not bad and len(data["tables"]) >= 60, (profile, bad)


def arm64_oracle_inputs():
    """tools/arm64_oracle.py's elementwise inputs (its own generator)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "arm64_oracle", os.path.join(ROOT, "tools", "arm64_oracle.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.mixed_inputs()


@pytest.mark.needs_torch
def test_sleef_names_and_the_default_profile():
    import torch
    # the profile of the imported torch's release (2.13 here), at its thread count
    assert sinpe._policy.resolve("sleef") == ("torch-aarch64-2.13", torch.get_num_threads())
    assert set(PROFILES) <= set(sinpe._backends.records.NAMES) and "sleef" in sinpe._backends.records.NAMES
    t = sinpe.positional_encoding(64, 64, backend="sleef", torch_threads=1)
    assert same(t, sinpe.positional_encoding(64, 64, backend="torch-aarch64-2.13",
                                                  torch_threads=1))
    assert "torch 2.15 on 64-bit Arm" in sinpe.reproduces("torch-aarch64-2.15")
    from conftest import run_python
    r = run_python("import sinpe; print(sinpe._policy.resolve('sleef')[0])")
    assert r.stdout.strip() == "torch-aarch64-2.15", r.stderr  # no torch: the newest measured
