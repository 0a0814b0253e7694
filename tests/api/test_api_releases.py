"""A framework's plain name ('numpy', 'tensorflow', 'jax', 'onnxruntime') on an installed
release with no measured profile: the newest measured profile is used, with a SinpeWarning
naming the installed release and that profile, once per release and process; an explicit
profile, a measured release and a framework not installed never warn; numerics() and the
command line say which profile stands for which release.  The installed release is faked
(the lookup monkeypatched, or a dist-info directory first on the path of a child process):
the suite also runs under NumPy 1.26, a real measured release (the numpy-2.0 profile).
The same for 'sleef' (torch on 64-bit Arm) with an unmeasured torch imported."""
import os
import subprocess
import sys
import types
import warnings

import numpy as np
import pytest

import sinpe
from conftest import assert_bits_equal, run_python
from sinpe._backends import policy, records

#: per framework: releases with no measured profile (as their metadata spells them), a
#: measured one, and the profile the plain name stands for
UNMEASURED = {"numpy": ["1.25.2", "2.5.0rc1"], "tensorflow": ["2.14.1", "2.22.1"],
              "jax": ["0.4.30", "0.11.0"], "onnxruntime": ["1.17.0", "1.4.2"]}
MEASURED = {"numpy": "2.4.6", "tensorflow": "2.21.0", "jax": "0.10.2", "onnxruntime": "1.32.1"}
PROFILE = {"numpy": "numpy-2.4", "tensorflow": "tensorflow-2.21", "jax": "jax-0.10",
           "onnxruntime": "onnxruntime-1.32"}
TITLE = {"numpy": "NumPy", "tensorflow": "TensorFlow", "jax": "JAX",
         "onnxruntime": "ONNX Runtime"}
CASES = [(fw, v) for fw in UNMEASURED for v in UNMEASURED[fw]]


@pytest.fixture
def fresh(monkeypatch):
    """Nothing warned, resolved, read or kept yet in this process (restored afterwards; a
    plain table's rows kept by an earlier call are returned without resolving its name),
    and a function that fakes a framework's installed release (None: not installed)."""
    sinpe.clear_cache()
    monkeypatch.setattr(sinpe._warn, "_WARNED", set())
    monkeypatch.setattr(policy, "_OPTS_CACHE", {})
    monkeypatch.setattr(records, "_RELEASES", {})
    monkeypatch.setitem(policy._STATE, "backend", policy._STATE["backend"])

    def install(fw, version):
        dists = list(records.FRAMEWORKS[fw].values())[-1][1]
        real = records._installed
        monkeypatch.setattr(records, "_installed",
                            lambda d: version if d == dists else real(d))
    return install


def sinpe_warnings(record):
    return [w for w in record if issubclass(w.category, sinpe.SinpeWarning)]


def test_the_warning_class_is_public_and_a_user_warning():
    assert issubclass(sinpe.SinpeWarning, UserWarning) and "SinpeWarning" in sinpe.__all__
    assert sinpe.SinpeWarning.__module__ == "sinpe._warn"


@pytest.mark.parametrize("fw,version", CASES)
def test_an_unmeasured_release_warns_once_naming_it_and_the_profile(fresh, fw, version):
    fresh(fw, version)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")  # the once is sinpe's own, not the filter's
        got = sinpe.positional_encoding(33, 16, backend=fw)
        policy._OPTS_CACHE.clear()  # resolved again: still once
        sinpe.positional_encoding(4, 8, backend=fw)
        sinpe.elementwise("sin", np.ones(5, np.float32), backend=fw)
        sinpe.set_backend(fw)
        sinpe.positional_encoding(4, 8)
    ws = sinpe_warnings(rec)
    assert len(ws) == 1, [str(w.message) for w in ws]
    msg = str(ws[0].message)
    assert f"backend {fw!r}" in msg and f"{TITLE[fw]} {version} is installed" in msg, msg
    assert f"no measured profile; using the {PROFILE[fw]} profile" in msg, msg
    assert ws[0].filename == __file__, ws[0].filename  # the caller's line, not sinpe's
    # the bits are the profile's, warned or not
    assert_bits_equal(got, sinpe.positional_encoding(33, 16, backend=PROFILE[fw]), fw)
    assert policy.resolve(fw, warn=False)[0] == PROFILE[fw]


@pytest.mark.parametrize("fw,version", CASES)
def test_the_explicit_profile_never_warns(fresh, fw, version):
    fresh(fw, version)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sinpe.positional_encoding(4, 8, backend=PROFILE[fw])
        sinpe.set_backend(PROFILE[fw])
        sinpe.positional_encoding(4, 8)
        info = sinpe.numerics()
    assert sinpe_warnings(rec) == []
    assert info["backend"] == info["default"] == PROFILE[fw]
    assert "chosen by name" in info["reproduces"], info["reproduces"]
    # numerics() still says what the plain name would mean on this installation
    assert info["frameworks"][fw] == {"installed": version, "profile": PROFILE[fw],
                                      "measured": False}


@pytest.mark.parametrize("fw", sorted(UNMEASURED))
@pytest.mark.parametrize("installed", ["measured", "not installed"])
def test_a_measured_release_or_none_installed_does_not_warn(fresh, fw, installed):
    version = MEASURED[fw] if installed == "measured" else None
    fresh(fw, version)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sinpe.positional_encoding(4, 8, backend=fw)
        sinpe.set_backend(fw)
        info = sinpe.numerics()
    assert sinpe_warnings(rec) == []
    assert info["backend"] == PROFILE[fw] and info["default"] == fw
    assert info["frameworks"][fw] == {"installed": version, "profile": PROFILE[fw],
                                      "measured": True if version else None}
    said = f"the installed {fw} {version}" if version else f"{fw} is not installed"
    assert said in info["reproduces"] and "no measured profile" not in info["reproduces"], \
        info["reproduces"]


@pytest.mark.parametrize("fw,version", CASES)
def test_numerics_says_which_profile_stands_for_the_unmeasured_release(fresh, fw, version):
    fresh(fw, version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sinpe.SinpeWarning)
        sinpe.set_backend(fw)
    info = sinpe.numerics()
    assert info["backend"] == PROFILE[fw] and info["default"] == fw
    text = info["reproduces"]
    assert f"{PROFILE[fw]}: {TITLE[fw]} {version} is installed, whose release has no measured " \
           "profile" in text and "chosen by name" not in text, text
    assert info["frameworks"][fw] == {"installed": version, "profile": PROFILE[fw],
                                      "measured": False}
    assert text == sinpe.reproduces(fw)


def test_a_warning_filter_set_to_error_raises_at_every_call(fresh):
    fresh("numpy", "1.25.2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", sinpe.SinpeWarning)
        for _ in range(2):  # not marked as given, not kept as resolved: raised again
            with pytest.raises(sinpe.SinpeWarning, match="NumPy 1.25.2 is installed"):
                sinpe.positional_encoding(4, 8, backend="numpy")
        sinpe.positional_encoding(4, 8, backend="numpy-2.4")  # the profile by name


def _fake_dists(tmp_path, versions):
    """A directory of dist-info metadata only (no code): first on a child's path, it is what
    importlib.metadata reads for those distributions."""
    for dist, version in versions.items():
        d = tmp_path / f"{dist.replace('-', '_')}-{version}.dist-info"  # (as pip names it)
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    path = [str(tmp_path)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
    return os.pathsep.join(path)


def test_sinpe_backend_warns_at_its_first_use_once(tmp_path):
    code = ("import warnings\nwarnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as rec:\n"
            "    import sinpe\n"
            "print('at import', len(rec))\n"
            "with warnings.catch_warnings(record=True) as rec:\n"
            "    warnings.simplefilter('always')\n"
            "    sinpe.positional_encoding(4, 8)\n"
            "    sinpe.positional_encoding(4, 8)\n"
            "    info = sinpe.numerics()\n"
            "print('at use', len(rec), rec[0].category.__name__, rec[0].filename)\n"
            "print(rec[0].message)\n"
            "print(info['backend'], info['default'], info['reproduces'])\n")
    r = run_python(code, SINPE_BACKEND="tensorflow",
                   PYTHONPATH=_fake_dists(tmp_path, {"tensorflow": "2.14.1"}))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "at import 0" and lines[1] == "at use 1 SinpeWarning <string>", r.stdout
    assert "TensorFlow 2.14.1 is installed" in lines[2] and "tensorflow-2.21 profile" in lines[2]
    assert lines[3].startswith("tensorflow-2.21 tensorflow ") and \
        "TensorFlow 2.14.1 is installed, whose release has no measured profile" in lines[3]


def test_the_command_line_says_it(tmp_path):
    env = dict(os.environ, PYTHONPATH=_fake_dists(tmp_path, {"jaxlib": "0.4.30"}))
    for args, extra in ((["--backend", "jax"], {}), ([], {"SINPE_BACKEND": "jax"})):
        r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", "10", "--d-model", "8",
                            "-o", "pe.npy", *args], capture_output=True, text=True, timeout=120,
                           cwd=tmp_path, env=dict(env, **extra))
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("sinpe: warning: backend 'jax': JAX 0.4.30 is installed, whose "
                              "release has no measured profile; using the jax-0.10 profile") \
            == 1 and "SinpeWarning" not in r.stderr, r.stderr
        assert "backend 'jax-0.10'" in r.stdout and "JAX 0.4.30 is installed" in r.stdout, r.stdout
        assert_bits_equal(np.load(tmp_path / "pe.npy"),
                          sinpe.positional_encoding(10, 8, backend="jax-0.10"), "CLI jax")


@pytest.mark.parametrize("version,profile,warns", [("2.16.0", "torch-aarch64-2.15", True),
                                                   ("2.12.1", "torch-aarch64-2.13", True),
                                                   ("2.14.0+cpu", "torch-aarch64-2.14", False)])
def test_sleef_with_an_unmeasured_torch_imported_warns_too(fresh, monkeypatch, version, profile,
                                                           warns):
    """'sleef' is the profile of the torch in this process (64-bit Arm): an imported torch
    of a release with no measured profile gets the nearest one's bits, with a warning."""
    cpu = types.SimpleNamespace(get_cpu_capability=lambda: "DEFAULT")
    fake = types.SimpleNamespace(__version__=version, get_num_threads=lambda: 3,
                                 backends=types.SimpleNamespace(cpu=cpu))
    monkeypatch.setitem(sys.modules, "torch", fake)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for _ in range(2):
            assert policy.resolve("sleef") == (profile, 3)
        assert policy.resolve(profile)[0] == profile
    ws = sinpe_warnings(rec)
    assert len(ws) == int(warns), [str(w.message) for w in ws]
    if warns:
        assert f"backend 'sleef': torch {version} is imported, whose release has no measured " \
               f"profile on 64-bit Arm; using the {profile} profile" in str(ws[0].message)
    monkeypatch.delitem(sys.modules, "torch")  # not imported: the newest measured, silent
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert policy.resolve("sleef")[0] == records.NEWEST
    assert sinpe_warnings(rec) == []


# ---- the second review's variants (issue 35, finding 5) ---------------------------------------

@pytest.mark.parametrize("version,warns", [
    ("2.4.0rc1", True), ("2.4rc1", True), ("2.4.0.dev0", True), ("1!2.4.0", True),
    ("2.4.post1", False), ("2.4.6+cpu", False), ("2.4.6", False)])
def test_prereleases_and_dev_builds_are_not_the_measured_release(fresh, version, warns):
    """A pre-release or a development build of a measured major.minor is code from before the
    release measured (another epoch another version): it warns; a post release or a local
    build of it does not (2.4rc1 warned where 2.4.0rc1 did not)."""
    fresh("numpy", version)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sinpe.positional_encoding(4, 8, backend="numpy")
    assert bool(sinpe_warnings(rec)) == warns, version


@pytest.mark.parametrize("fw,dist,version", [
    ("tensorflow", "tf-nightly", "2.22.0.dev20260301"), ("tensorflow", "tensorflow-macos", "2.14.1"),
    ("onnxruntime", "ort-nightly", "1.33.0.dev20260101"),
    ("onnxruntime", "onnxruntime-openvino", "1.17.0")])
def test_other_distributions_of_a_framework_are_read(tmp_path, fw, dist, version):
    """TensorFlow and ONNX Runtime ship under other distribution names (nightlies, platform
    builds): one installed at an unmeasured release warns, and numerics() names it (they
    were read as not installed: the measured release's bits in silence)."""
    code = ("import warnings, sinpe\n"
            "with warnings.catch_warnings(record=True) as rec:\n"
            "    warnings.simplefilter('always')\n"
            f"    sinpe.positional_encoding(4, 8, backend={fw!r})\n"
            "print(len(rec), rec[0].message if rec else '')\n")
    r = run_python(code, PYTHONPATH=_fake_dists(tmp_path, {dist: version}))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("1 ") and f"{TITLE[fw]} {version} is installed" in r.stdout, \
        r.stdout


def test_the_command_line_under_warnings_as_errors(tmp_path):
    """PYTHONWARNINGS=error: the command line says `sinpe: error: ...` and exits 2, as for
    its other errors (a raw SinpeWarning traceback before)."""
    env = dict(os.environ, PYTHONPATH=_fake_dists(tmp_path, {"jaxlib": "0.4.30"}),
               PYTHONWARNINGS="error")
    r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", "10", "--d-model", "8",
                        "-o", "pe.npy", "--backend", "jax"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 2 and "sinpe: error: backend 'jax': JAX 0.4.30 is installed" in \
        r.stderr and "Traceback" not in r.stderr, r.stderr


def test_racing_threads_under_an_error_filter_each_raise(fresh):
    """Under a filter that turns the warning into an error, threads racing the first call each
    raise (one could return the profile's bits in silence while another's warning was
    raising)."""
    import threading
    fresh("numpy", "1.25.2")
    results = []
    barrier = threading.Barrier(8)

    def one():
        barrier.wait()
        try:
            sinpe.elementwise("sin", np.ones(4, np.float32), backend="numpy")
            results.append("ok")
        except sinpe.SinpeWarning:
            results.append("raised")
    with warnings.catch_warnings():
        warnings.simplefilter("error", sinpe.SinpeWarning)
        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == ["raised"] * 8, results


def test_a_warning_ignored_once_is_given_later(fresh):
    """A first call under a filter that ignores the warning (a library's catch_warnings) does
    not use up the once: a later call outside it warns."""
    fresh("numpy", "1.25.2")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sinpe.elementwise("sin", np.ones(4, np.float32), backend="numpy")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sinpe.elementwise("sin", np.ones(4, np.float32), backend="numpy")
    assert len(sinpe_warnings(rec)) == 1



#: releases measured to give a profile's bits (docs/backends.md: which releases each profile
#: stands for), and the profile their plain name means
SAME = [("numpy", "2.1.3", "numpy-2.4"), ("numpy", "2.3.5", "numpy-2.4"),
        ("numpy", "1.26.4", "numpy-2.0"), ("numpy", "2.0.2", "numpy-2.0"),
        ("tensorflow", "2.20.0", "tensorflow-2.21"), ("tensorflow", "2.16.2", "tensorflow-2.19"),
        ("tensorflow", "2.19.1", "tensorflow-2.19"), ("jax", "0.9.2", "jax-0.10"),
        ("jax", "0.8.3", "jax-0.8"), ("jax", "0.6.2", "jax-0.7"),
        ("onnxruntime", "1.18.1", "onnxruntime-1.32"), ("onnxruntime", "1.31.1", "onnxruntime-1.32")]


@pytest.mark.parametrize("fw,version,profile", SAME)
def test_a_release_measured_equal_takes_its_profile_without_a_warning(fresh, fw, version, profile):
    fresh(fw, version)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = sinpe.positional_encoding(9, 6, backend=fw)
        info = sinpe.numerics()
    assert sinpe_warnings(rec) == []
    assert policy.resolve(fw, warn=False)[0] == profile
    assert info["frameworks"][fw] == {"installed": version, "profile": profile, "measured": True}
    assert_bits_equal(got, sinpe.positional_encoding(9, 6, backend=profile), fw)


@pytest.mark.parametrize("fw,version,word", [("jax", "0.4.30", "JAX 0.4.30")])
def test_a_release_measured_to_differ_says_how(fresh, fw, version, word):
    """A release measured to differ from every profile warns as an unmeasured one, and says
    what was measured."""
    fresh(fw, version)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sinpe.positional_encoding(4, 8, backend=fw)
    ws = sinpe_warnings(rec)
    assert len(ws) == 1 and "no measured profile" in str(ws[0].message)
    assert "measured: " in str(ws[0].message) and word in str(ws[0].message), str(ws[0].message)


def test_jax_before_0_9_has_no_exp_tail():
    """JAX 0.8 (the jax-0.8 profile): an exp of a short vector is XLA's in every
    element, where 0.9 and 0.10 leave its last n % 8 to glibc; measured with jax 0.8.3 and
    0.10.2 (the values and bits below)."""
    x = np.array([8.92686367, 84.2190247, 1.0], np.float32)
    old = sinpe.elementwise("exp", x, backend="jax-0.8").view(np.uint32)
    new = sinpe.elementwise("exp", x, backend="jax-0.10").view(np.uint32)
    assert list(old[:2]) == [0x45EB5CDA, 0x7C35511E] and list(new[:2]) == [0x45EB5CDB, 0x7C35511D]
    long = np.linspace(-80, 80, 64, dtype=np.float32)  # no tail at 64 elements in either
    assert_bits_equal(sinpe.elementwise("exp", long, backend="jax-0.8"),
                      sinpe.elementwise("exp", long, backend="jax-0.10"), "jax")


def test_tensorflow_before_2_20_has_the_older_eigen_pow():
    """TensorFlow 2.15 to 2.19 (the tensorflow-2.19 profile): Eigen's older pow, measured with
    tensorflow-cpu 2.19.1 and 2.21.0 (the values and bits below: base ** (k / d) as the presets'
    pow step computes it, the first of 8 elements, ahead of the glibc tail)."""
    from sinpe import _jobs
    from sinpe._backends.policy import call_opts
    want = {"tensorflow-2.19": [0x0B9CE262, 0x3947C6DF, 0x3D70C375],
            "tensorflow-2.21": [0x0B9CE263, 0x3947C6DE, 0x3D70C376]}
    for prof, bits in want.items():
        o = call_opts(None, None, prof, None, None)
        got = [int(_jobs._freqs("pow", 8, o, start=k, step=1, b=b, base=base).view(np.uint32)[0])
               for base, k, b in ((1e4, -999, 128.0), (3.0, -499, 64.0), (1e-4, 4, 13.0))]
        assert got == bits, (prof, [hex(v) for v in got])


def test_jax_0_5_to_0_7_take_two_glibc_elements_of_some_long_rows():
    """JAX 0.5 to 0.7 (the jax-0.7 profile): in each row of m >= 66 elements along the last
    axis with m % 32 = 2 or 3, the two elements from m - m % 32 on are glibc's expf (measured
    with jax 0.5.3, 0.6.2 and 0.7.2: 0x673042db at element 4096 of 4099, where XLA's is
    0x673042da); no other element, no other length, not a trailing axis of 1."""
    v = np.float32(55.0785637)
    for shape, where in (((4099,), [4096, 4097]), ((3, 67), [64, 65]), ((2, 2050), [2048, 2049]),
                         ((98,), [96, 97]), ((4099, 1), []), ((2, 33), []), ((35,), []), ((82,), [])):
        x = np.full(shape, v)
        old = sinpe.elementwise("exp", x, backend="jax-0.7").view(np.uint32).reshape(-1, shape[-1])
        xla = sinpe.elementwise("exp", x, backend="jax-0.8").view(np.uint32).reshape(-1, shape[-1])
        for row_old, row_xla in zip(old, xla):
            assert sorted(np.nonzero(row_old != row_xla)[0].tolist()) in (where, where[:1]), shape
            if where:
                assert row_old[where[0]] == 0x673042DB and row_xla[where[0]] == 0x673042DA


def test_numpy_before_2_1_has_the_older_sin_and_cos():
    """NumPy 1.26 and 2.0 (the numpy-2.0 profile): the quadrant in two roundings, a NaN through
    glibc (its payload kept); measured with numpy 2.0.2 and 2.4.6 (the bits below)."""
    x = np.array([18652.4219, -85.6084061], np.float32)
    old = sinpe.elementwise("sin", x, backend="numpy-2.0").view(np.uint32)
    new = sinpe.elementwise("sin", x, backend="numpy-2.4").view(np.uint32)
    assert list(old) == [0xBF352E4A, 0x3F35053E] and list(new) == [0xBF352E4B, 0x3F35053D]
    c = np.array([2349.12598], np.float32)
    assert sinpe.elementwise("cos", c, backend="numpy-2.0").view(np.uint32)[0] == 0x3F350830
    assert sinpe.elementwise("cos", c, backend="numpy-2.4").view(np.uint32)[0] == 0x3F35082F
    nan = np.array([0x7F800001, 0xFF812345], np.uint32).view(np.float32)
    assert list(sinpe.elementwise("sin", nan, backend="numpy-2.0").view(np.uint32)) == \
        [0x7FC00001, 0xFFC12345]
    assert list(sinpe.elementwise("cos", nan, backend="numpy-2.4").view(np.uint32)) == \
        [0x7FC00000, 0x7FC00000]
