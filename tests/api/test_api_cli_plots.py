"""Pictures (Agg), the command line, the quickstart notebook and the widget, and the import
from the source tree."""
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import sinpe  # noqa: E402
from conftest import ROOT, assert_bits_equal, same  # noqa: E402
from sinpe import plot  # noqa: E402

PE = sinpe.positional_encoding


def _pixels(fig):
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3]


@pytest.mark.parametrize("make", [lambda: plot.heatmap(max_len=128, d_model=64),
                                  lambda: plot.waves(100, 64),
                                  lambda: plot.similarity(128, 64)],
                         ids=["heatmap", "waves", "similarity"])
def test_plots_not_blank(make):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    fig = make()
    FigureCanvasAgg(fig)
    px = _pixels(fig)
    assert px.std() > 20, "image is (nearly) one colour"
    assert len(np.unique(px.reshape(-1, 3), axis=0)) > 50


def test_plots_refuse_bad_dims_and_shapes():
    with pytest.raises(ValueError, match=r"dims must be integers in \[0, 8\), got 8"):
        plot.waves(10, 8, dims=[8])
    with pytest.raises(ValueError, match="dims must be integers"):
        plot.waves(10, 8, dims=[1.5])
    with pytest.raises(ValueError, match="shape"):
        plot.heatmap(np.zeros((2, 3, 4)))


@pytest.mark.needs_torch
def test_plots_take_a_module_buffer():
    from sinpe.torch import SinusoidalPositionalEncoding
    assert plot.heatmap(SinusoidalPositionalEncoding(16, 20).pe.numpy()) is not None


def test_cli(tmp_path):
    out = tmp_path / "pe.npy"
    r = subprocess.run([sys.executable, "-m", "sinpe", "--max-len", "100", "--d-model", "16",
                        "-o", str(out)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "numerics: backend" in r.stdout
    # the CLI runs without torch imported: 'auto' may choose another backend than this
    # process (on 64-bit Arm the built-in), so compare with the one it names
    used = r.stdout.split("numerics: backend '", 1)[1].split("'", 1)[0]
    assert_bits_equal(np.load(out), sinpe.positional_encoding(100, 16, backend=used), "CLI table")
    # an odd --d-model exits with 2 and names it: test_cli_bad_arguments


def _cli(*args, cwd, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "sinpe", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=e)


def test_cli_npz_dtype_plot(tmp_path):
    r = _cli("--max-len", "300", "--d-model", "64", "--dtype", "float16", "--numerics", "builtin",
             "-o", "pe.npz", "--plot", "pe.png", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    got = np.load(tmp_path / "pe.npz")["pe"]
    assert got.dtype == np.float16 and got.shape == (300, 64)
    want = sinpe.positional_encoding(300, 64, dtype="float16", backend="builtin")
    assert (got.view(np.uint16) == want.view(np.uint16)).all()
    assert (tmp_path / "pe.png").stat().st_size > 10_000
    assert "numerics: backend 'builtin'" in r.stdout


def test_cli_progress_bar_for_long_tables(tmp_path):
    # the bar appears once the predicted total passes SINPE_PROGRESS_AFTER seconds (1 by
    # default; 0 here, so that the test does not depend on this machine's speed)
    r = _cli("--max-len", "40000", "--d-model", "512", "--numerics", "builtin", "--threads", "1",
             "-o", "big.npy", cwd=tmp_path, env={"SINPE_PROGRESS_AFTER": "0"})
    assert r.returncode == 0, r.stderr
    assert "100.0%" in r.stderr and "sinpe: [" in r.stderr
    quiet = _cli("--max-len", "1000", "--d-model", "512", "-o", "small.npy", cwd=tmp_path)
    assert quiet.returncode == 0 and "sinpe: [" not in quiet.stderr
    got = np.load(tmp_path / "big.npy", mmap_mode="r")
    assert got.shape == (40000, 512)
    assert_bits_equal(np.array(got), sinpe.positional_encoding(40000, 512, backend="builtin"),
                      "table written in blocks")


@pytest.mark.parametrize("args,msg", [
    (["--max-len", "10", "--d-model", "7", "-o", "x.npy"], "d_model must be an even integer"),
    (["--max-len", "-1", "--d-model", "8", "-o", "x.npy"], "max_len must be >= 0"),
    (["--max-len", "10", "--d-model", "8", "--base", "-3", "-o", "x.npy"], "base must be finite"),
    (["--max-len", "10", "--d-model", "8", "-o", "x.txt"], "--out must end in .npy or .npz"),
    (["--max-len", "ten", "--d-model", "8", "-o", "x.npy"], "invalid int value"),
    (["--max-len", "10", "--d-model", "8", "--dtype", "int8", "-o", "x.npy"], "invalid choice"),
])
def test_cli_bad_arguments(tmp_path, args, msg):
    r = _cli(*args, cwd=tmp_path)
    assert r.returncode == 2 and msg in r.stderr, r.stderr
    assert not (tmp_path / "x.npy").exists()


def test_cli_unwritable(tmp_path):
    r = _cli("--max-len", "4", "--d-model", "8", "-o", str(tmp_path / "no" / "such" / "x.npy"),
             cwd=tmp_path)
    assert r.returncode == 1 and "cannot write" in r.stderr


def test_cli_help(tmp_path):
    r = _cli("--help", cwd=tmp_path)
    assert r.returncode == 0 and "--max-len" in r.stdout and "--numerics" in r.stdout


def _sinpe_cmd(*args):
    return [sys.executable, "-m", "sinpe", "--max-len", "10", "--d-model", "8", *args]


def test_cli_threads_pipe_full_and_bfloat16(tmp_path):
    r = subprocess.run(_sinpe_cmd("--threads", "1", "-o", "a.npy"), capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "1 thread)" in r.stdout and "2 threads" not in r.stdout
    cmd = " ".join(f"'{c}'" for c in _sinpe_cmd("-o", "b.npy"))
    r = subprocess.run(["bash", "-c", f"set -o pipefail; {cmd} | true"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr
    with open("/dev/full", "w") as full:
        r = subprocess.run(_sinpe_cmd("-o", "c.npy"), stdout=full, stderr=subprocess.PIPE, text=True,
                           cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "report could not be printed" in r.stderr
    assert (tmp_path / "c.npy").exists()
    r = subprocess.run(_sinpe_cmd("--dtype", "bfloat16", "-o", "d.npy"), capture_output=True,
                       text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "np.load(path).view(ml_dtypes.bfloat16)" in r.stdout
    loaded = np.load(tmp_path / "d.npy").view(ml_dtypes.bfloat16)  # the documented line
    assert same(loaded, PE(10, 8, dtype="bfloat16"))


@pytest.mark.needs_torch
def test_quickstart_notebook_runs(tmp_path):
    import nbclient
    import nbformat
    nb = nbformat.read(os.path.join(ROOT, "examples", "quickstart.ipynb"), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on any error
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    text = "".join(o.get("text", "") for o in outputs)
    assert "bit-identical buffers: True" in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3


def test_widget_update_without_a_browser():
    from sinpe.widget import Explorer, explore
    ex = Explorer(64, 16)
    d = ex.update(5, 3)
    pe = sinpe.positional_encoding(64, 16)
    assert d["value"] == pe[5, 3] and d["kind"] == "cos"
    assert np.array_equal(d["wave"], pe[:, 3]) and np.array_equal(d["vector"], pe[5])
    assert abs(d["wavelength"] - 2 * np.pi / np.exp(2 * -np.log(10000) / 16)) < 1e-4
    assert len(ex.wave_ax.lines) == 2 and ex.vec_ax.get_title() == "position 5"
    ex.update(63, 15)
    assert ex.vec_ax.get_title() == "position 63" and "dimension 15" in ex.wave_ax.get_title()
    with pytest.raises(ValueError, match="pos must be in"):
        ex.update(64, 0)
    box = explore(32, 8)
    sliders = box.children[0].children
    sliders[0].value, sliders[1].value = 7, 2  # a slider move redraws
    assert box.explorer.pos == 7 and box.explorer.dim == 2


# ---- the import from the source tree ------------------------------------------------------

def test_import_in_source_tree_says_what_to_do():
    if any(f.startswith("_sinpe") and not f.endswith((".pyi", ".py")) for f in os.listdir(
            os.path.join(ROOT, "sinpe"))):
        pytest.fail("a built extension lies in the source tree (pip install -e .?): "
                    "this test needs a clean tree")
    r = subprocess.run([sys.executable, "-c", "import sinpe"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode != 0
    assert "circular import" not in r.stderr and "pip install -e ." in r.stderr, r.stderr


@pytest.mark.parametrize("env,msg", [
    ({"SINPE_CACHE_MB": "-1"}, "SINPE_CACHE_MB='-1' is not valid"),
    ({"SINPE_CACHE_MB": str(1 << 39)}, "physical memory"),
    ({"SINPE_BACKEND": "nope"}, "SINPE_BACKEND='nope' is not valid"),
    ({"SINPE_KERNEL": "nope"}, "SINPE_KERNEL='nope' is not valid"),
    ({"SINPE_NUM_THREADS": "x"}, "SINPE_NUM_THREADS='x' is not valid"),
    ({"SINPE_NUM_THREADS": "0"}, "SINPE_NUM_THREADS='0' is not valid"),
    ({"SINPE_NUM_THREADS": "99999999999999999999"}, "SINPE_NUM_THREADS='99999999999999999999' is not valid"),
])
def test_cli_bad_environment(tmp_path, env, msg):
    """Issue 25, 12: a bad SINPE_* variable is a bad argument: `sinpe: error: ...`, exit 2,
    no traceback, nothing written (it ended in a traceback and exit 1)."""
    e = dict(os.environ, **env)
    r = _cli("--max-len", "4", "--d-model", "8", "-o", "pe.npy", cwd=tmp_path, env=e)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stderr.startswith("sinpe: error: ") and msg in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "pe.npy").exists()
    # a program that imports sinpe still gets the exception at import
    from conftest import run_python
    r = run_python("import sinpe", **env)
    assert r.returncode == 1 and "Traceback" in r.stderr and msg in r.stderr
