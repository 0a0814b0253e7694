"""The proof on the instance: before anything changes, each rotary module's own forward and
sinpe's are called on the module (its state saved and restored, torch's random state untouched)
at a run of positions, scattered positions, mrope rows and axial pairs, in float32 and
bfloat16; a module whose outputs differ in any bit keeps its own forward.  A module on the meta
device is proven on a CPU twin built from its config."""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

from . import rotaries
from .compare import bits_of, ndiff
from .forwards import sincos_tables
from .hf_rope import hf_rope
from .rotaries import GLIBC_SINCOS, layer_types_of, rotary_signature
from .shadow import own
from .state import build



@contextlib.contextmanager
def _restored(module: Any) -> Iterator[None]:
    """The module's attributes, buffers (their values too) and mode as they were, and torch's
    random state untouched, whatever runs inside."""
    attrs = dict(module.__dict__)
    bufs = dict(module._buffers)
    values = {k: v.detach().clone() for k, v in bufs.items()
              if isinstance(v, torch.Tensor) and not v.is_meta}
    training = module.training
    try:
        with torch.random.fork_rng(devices=[]):
            module.training = False
            yield
    finally:
        module.__dict__.clear()
        module.__dict__.update(attrs)
        module._buffers.clear()
        module._buffers.update(bufs)
        with torch.no_grad():
            for k, v in values.items():
                b = bufs[k]
                if not torch.equal(bits_of(b), bits_of(v)):
                    b.copy_(v)
        module.training = training


def _probe_positions(module: Any) -> List[torch.Tensor]:
    """Positions the proof calls both forwards with: a run from 0 and scattered positions, all
    below the lengths where a dynamic or longrope module changes its state."""
    cap = 4096
    for name in ("original_max_seq_len", "max_seq_len_cached"):
        v = getattr(module, name, None)
        if isinstance(v, int) and v > 1:
            cap = min(cap, v - 1)
    cfg = getattr(module, "config", None)
    rp = getattr(cfg, "rope_parameters", None)
    if isinstance(rp, dict):
        for p in [rp] + [v for v in rp.values() if isinstance(v, dict)]:
            omp = p.get("original_max_position_embeddings")
            if isinstance(omp, int) and omp > 1:
                cap = min(cap, omp - 1)
    scattered = sorted({min(p, cap) for p in (0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 377,
                                              1000, 1597, 2584, 4095)})
    run = torch.arange(min(16, cap + 1))
    sc = torch.tensor(scattered)
    return [run[None], sc[None],
            torch.stack([sc, (sc // 2), (sc * 3) % (cap + 1)])[:, None],  # mrope's 3 rows
            torch.stack([sc, sc.flip(0)], -1)[None], torch.stack([run, run.flip(0)], -1)]


def _rotary_inputs(module: Any, kind: str) -> List[Tuple[Any, ...]]:
    """The proof's calls of a rotary module: (x, position_ids[, layer_type]) in float32 and
    bfloat16; a grid module's image; PhiMoE's a long call too."""
    if kind == "patches":
        ph = module.config.patch_size
        ph, pw = (ph[0], ph[1]) if isinstance(ph, (tuple, list)) else (ph, ph)
        return [(torch.zeros(1, 3, 2 * ph, 3 * pw, dtype=dt),)
                for dt in (torch.float32, torch.bfloat16)]
    if kind == "grid":
        c = module.config
        n = c.q_aggregation_kernel_size + 2 * c.q_aggregation_stride
        return [(torch.zeros(1, 4, n, n + c.q_aggregation_stride, dtype=dt),)
                for dt in (torch.float32, torch.bfloat16)]
    out: List[Tuple[Any, ...]] = []
    positions = _probe_positions(module)
    if kind == "mscale":
        omp = module.config.rope_parameters.get("original_max_position_embeddings")
        if isinstance(omp, int):
            positions.append(torch.tensor([[0, 1, omp - 1, omp, omp + 7]]))
    lts = layer_types_of(module) if rotary_signature(type(module)) else [None]
    for dt in (torch.float32, torch.bfloat16):
        x = torch.zeros(1, dtype=dt)
        for pos in positions:
            for lt in lts:
                out.append((x, pos) if lt is None else (x, pos, lt))
    return out


def _prove(module: Any, new: Callable[..., Any], own: Callable[..., Any],
           calls: List[Tuple[Any, ...]]) -> Optional[str]:
    """None when the module's own forward and the new one give the same bits on every call
    (the module's state restored after each); else why not."""
    compared = 0
    for args in calls:
        with _restored(module):
            try:
                with torch.no_grad():
                    want = own(*args)
            except Exception:
                continue  # inputs the module itself refuses: nothing to compare
        with _restored(module):
            try:
                with torch.no_grad():
                    got = new(*args)
            except NotImplementedError:
                raise
            except Exception as e:
                return f"sinpe's forward raised {type(e).__name__}: {e}"
        n, total = ndiff(want, got)
        compared += 1
        if n:
            what = "a different shape or dtype" if n < 0 else f"{n} of {total} values differ"
            pos = args[1] if len(args) > 1 and isinstance(args[1], torch.Tensor) else None
            at = f" at positions {pos.flatten().tolist()[:6]}..." if pos is not None else ""
            return (f"its own forward and sinpe's differ ({what}{at}, "
                    f"{args[0].dtype})")
    return None if compared else "its own forward took none of the probe inputs"


def _twin(module: Any) -> Any:
    """A CPU copy of a module on the meta device to prove the patch on: built again from its
    config by its own class (its buffers as its init makes them); None when that fails."""
    try:
        with torch.device("cpu"):
            twin = type(module)(module.config)
    except Exception:
        return None
    if set(twin._buffers) != set(module._buffers):
        return None
    return twin


def _on_meta(module: Any) -> bool:
    return any(b.is_meta for b in module.buffers(recurse=False))


def _check_sincos(module: Any, family: str) -> None:
    """The whole buffer, recomputed, bit for bit; a buffer that is not the table refuses the
    family."""
    buf = module.embed_positions
    if buf.is_meta:
        return
    if buf.dim() != 2 or buf.shape[-1] != module.pos_embd_dim:
        raise NotImplementedError(f"{family}: {type(module).__name__}.embed_positions has "
                                  f"shape {tuple(buf.shape)}, not (positions, "
                                  f"{module.pos_embd_dim})")
    sin, cos = sincos_tables(module, torch.arange(buf.shape[0])[None], buf.dtype, None)
    got = torch.cat((sin, cos), dim=-1)[0].to(buf.device)
    n = int((bits_of(got) != bits_of(buf)).sum())
    if n:
        raise NotImplementedError(f"{family}: {type(module).__name__}.embed_positions is not "
                                  f"the sin/cos table sinpe computes ({n} of {buf.numel()} "
                                  "values differ)")


def check_rotary(module: Any, spec: Dict[str, Any], family: str) -> None:
    """hf_rope on the module's config: a family hf_rope refuses raises NotImplementedError
    here, before anything changes."""
    for lt in spec.get("layer_types", [None]):
        name = f"{lt}_inv_freq" if lt is not None else "inv_freq"
        inv = getattr(module, name, None)
        if not isinstance(inv, torch.Tensor):
            raise NotImplementedError(f"{family}: {type(module).__name__} has no {name} buffer "
                                      "(not the inv_freq form sinpe.torch.patch reproduces)")
        inv = inv if not inv.is_meta else torch.ones(inv.shape, dtype=inv.dtype)
        try:
            try:
                hf_rope(spec["configs"][lt], torch.arange(2)[None], inv_freq=inv,
                        dtype=torch.float32, layer_type=lt, backend=spec["backend"],
                        attention_scaling=1.0)
            except ValueError:  # a vision tower's axial rope: (batch, N, 2) positions
                hf_rope(spec["configs"][lt], torch.arange(4).view(1, 2, 2), inv_freq=inv,
                        dtype=torch.float32, layer_type=lt, backend=spec["backend"],
                        attention_scaling=1.0)
        except NotImplementedError as e:
            raise NotImplementedError(f"{family}: {type(module).__name__} cannot be "
                                      f"reproduced: {e}") from None


def proof_of(module: Any, spec: Dict[str, Any], family: str) -> Optional[str]:
    """Whether sinpe's forward gives the module's own bits (None) or why not.  The proof runs
    with torch's kernels whatever backend the patch asked for (another backend's tables
    differ by design); on a CPU twin for a module on the meta device."""
    target = module
    if _on_meta(module):
        target = _twin(module)
        if target is None:
            return "it is on the meta device and no CPU twin could be built from its config"
    proof_spec = dict(spec)
    if spec["kind"] != "polar":
        proof_spec["backend"] = None
    elif not rotaries.glibc_like_torch():  # (read through the module: tests replace it)
        return None  # backend= given where glibc's cosf/sinf are not the C library's: unproven
    else:
        proof_spec["backend"] = GLIBC_SINCOS
    if spec["kind"] == "sincos":
        _check_sincos(target, family)
    new = build(target, "forward", proof_spec)
    return _prove(target, new, own(target), _rotary_inputs(target, spec["kind"]))
