"""The presets' operation lists (docs/presets.md), written out as the oracles the
tests compare sinpe with, for the libraries that cannot be installed here (fairseq,
fairseq2, tensor2tensor) and, on every platform, for all of them.

Each oracle does the library's steps in NumPy float32 (and float64 where the library does),
with the transcendental steps taken from `F`:
  - TORCH: torch.exp / sin / cos / pow on tensors of the very shape the library builds
    (torch's SLEEF vectors and thread chunks on 64-bit Arm depend on it), i.e. the bits the
    library gives with this torch;
  - CR: correctly rounded float32 functions (mpmath, tests/crmath.py), the reference of
    sinpe's built-in backend.
NumPy's float32 products, quotients and sums are the same IEEE operations as torch's.
"""
import math

import numpy as np
import torch

from crmath import cr, cr_pow

f32 = np.float32


class TorchF:
    name = "torch"

    @staticmethod
    def exp(a):
        return torch.exp(torch.from_numpy(np.ascontiguousarray(a, f32))).numpy()

    @staticmethod
    def sin(a):
        return torch.sin(torch.from_numpy(np.ascontiguousarray(a, f32))).numpy()

    @staticmethod
    def cos(a):
        return torch.cos(torch.from_numpy(np.ascontiguousarray(a, f32))).numpy()

    @staticmethod
    def pow(base, e):
        """torch.pow of a float32 scalar base (a 0-dim tensor) and a float32 tensor."""
        return torch.pow(torch.tensor(f32(base)), torch.from_numpy(np.ascontiguousarray(e, f32))).numpy()


class CRF:
    name = "cr"

    @staticmethod
    def _map(func, a):
        a = np.asarray(a, f32)
        return np.array([cr(func, v) for v in a.ravel()], f32).reshape(a.shape)

    @classmethod
    def exp(cls, a):
        return cls._map("exp", a)

    @classmethod
    def sin(cls, a):
        return cls._map("sin", a)

    @classmethod
    def cos(cls, a):
        return cls._map("cos", a)

    @staticmethod
    def pow(base, e):
        e = np.asarray(e, f32)
        return np.array([cr_pow(base, v) for v in e.ravel()], f32).reshape(e.shape)


def ar(n, start=0, step=1):
    """torch.arange(start, start + n*step, step).float() (exact for these sizes)."""
    return (start + step * np.arange(n, dtype=np.int64)).astype(f32)


# ---- fairseq family (sections 1a, 3c) -----------------------------------------------------

def fairseq(F, num_embeddings, embedding_dim, padding_idx=None, swap=False):
    h = embedding_dim // 2
    c = math.log(10000) / (h - 1)
    freq = F.exp(ar(h) * f32(-c))
    ang = ar(num_embeddings)[:, None] * freq[None, :]
    s, co = F.sin(ang), F.cos(ang)
    emb = np.concatenate([co, s] if swap else [s, co], axis=1)
    if embedding_dim % 2:
        emb = np.concatenate([emb, np.zeros((num_embeddings, 1), f32)], axis=1)
    if padding_idx is not None:
        emb[padding_idx, :] = 0
    return emb


def fairseq2(F, encoding_dim, max_seq_len, legacy_pad_idx=None):
    h = encoding_dim // 2
    freq = F.exp((ar(h) * f32(-math.log(10000.0))) / f32(h - 1))
    off = 0 if legacy_pad_idx is None else 1 + legacy_pad_idx
    ang = ar(max_seq_len, off)[:, None] * freq[None, :]
    table = np.zeros((max_seq_len + 1, encoding_dim), f32)
    table[1:] = np.concatenate([F.sin(ang), F.cos(ang)], axis=1)
    return table


def whisper(F, length, channels, max_timescale=10000):
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = F.exp(f32(-inc) * ar(channels // 2))
    t = ar(length)[:, None] * inv[None, :]
    return np.concatenate([F.sin(t), F.cos(t)], axis=1)


# ---- TF lineage (2a-2c) -----------------------------------------------------------------------

def tensor2tensor(F, length, channels, min_timescale=1.0, max_timescale=1.0e4, start_index=0):
    n = channels // 2
    inc = f32(math.log(float(max_timescale) / float(min_timescale))) / max(f32(n) - f32(1), f32(1))
    inv = f32(min_timescale) * F.exp(ar(n) * -inc)
    t = ar(length, start_index)[:, None] * inv[None, :]
    sig = np.concatenate([F.sin(t), F.cos(t)], axis=1)
    sig = np.pad(sig, [[0, 0], [0, channels % 2]])
    return sig.reshape(1, length, channels)


def keras_hub(F, shape, max_wavelength=10000, start_index=0, positions=None):
    L, d = shape[-2], shape[-1]
    pos = ar(L, start_index) if positions is None else np.asarray(positions, f32)
    if pos.ndim == 1:
        pos = pos[None]
    min_freq = f32(1 / max_wavelength)
    ts = F.pow(min_freq, (2 * (np.arange(d) // 2)).astype(f32) / f32(d))
    ang = pos[:, :, None] * ts[None, None, :]
    cos_mask = (np.arange(d) % 2).astype(f32)
    sin_mask = f32(1) - cos_mask
    pe = F.sin(ang) * sin_mask + F.cos(ang) * cos_mask
    return np.broadcast_to(pe, shape)


def tf_tutorial(length, depth):
    """The current tutorial, numpy float64, then tf.cast to float32."""
    depth = depth / 2
    positions = np.arange(length)[:, np.newaxis]
    depths = np.arange(depth)[np.newaxis, :] / depth
    rads = positions * (1 / (10000 ** depths))
    return np.concatenate([np.sin(rads), np.cos(rads)], axis=-1).astype(f32)


def tf_tutorial_legacy(position, d_model):
    i = np.arange(d_model)[np.newaxis, :]
    rads = np.arange(position)[:, np.newaxis] * (1 / np.power(10000, (2 * (i // 2)) / np.float32(d_model)))
    rads[:, 0::2] = np.sin(rads[:, 0::2])
    rads[:, 1::2] = np.cos(rads[:, 1::2])
    return rads[np.newaxis, ...].astype(f32)


# ---- transformers float64 tables, diffusers, MAE, timm (3a, 3b, 4, 5a, 5b) --------------------

def xlm(n_pos, dim):
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out = np.empty((n_pos, dim), f32)
    out[:, 0::2] = np.sin(enc[:, 0::2])
    out[:, 1::2] = np.cos(enc[:, 1::2])
    return out


def marian(n_pos, dim):
    enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)] for pos in range(n_pos)])
    out = np.empty((n_pos, dim), f32)
    s = dim // 2 if dim % 2 == 0 else dim // 2 + 1
    out[:, :s] = np.sin(enc[:, 0::2])
    out[:, s:] = np.cos(enc[:, 1::2])
    return out


def diffusers_timestep(F, timesteps, embedding_dim, flip_sin_to_cos=False, downscale_freq_shift=1,
                       scale=1, max_period=10000):
    h = embedding_dim // 2
    e = f32(-math.log(max_period)) * ar(h)
    e = e / f32(h - downscale_freq_shift)
    emb = np.asarray(timesteps).astype(f32)[:, None] * F.exp(e)[None, :]
    emb = f32(scale) * emb
    emb = np.concatenate([F.sin(emb), F.cos(emb)], axis=-1)
    if flip_sin_to_cos:
        emb = np.concatenate([emb[:, h:], emb[:, :h]], axis=-1)
    if embedding_dim % 2:
        emb = np.pad(emb, [[0, 0], [0, 1]])
    return emb


def mae_1d(d, pos):
    """MAE's get_1d_sincos_pos_embed_from_grid(d, pos), float64 (np.float -> float64)."""
    omega = np.arange(d // 2, dtype=np.float64)
    omega /= d / 2.
    omega = 1. / 10000 ** omega
    out = np.einsum("m,d->md", pos.reshape(-1), omega)
    return np.concatenate([np.sin(out), np.cos(out)], axis=1)


def mae_2d(embed_dim, grid_size, cls_token=False):
    """MAE util/pos_embed.py with np.float -> float64."""
    g = np.arange(grid_size, dtype=f32)
    grid = np.stack(np.meshgrid(g, g), axis=0).reshape([2, 1, grid_size, grid_size])
    emb = np.concatenate([mae_1d(embed_dim // 2, grid[0]), mae_1d(embed_dim // 2, grid[1])], axis=1)
    if cls_token:
        emb = np.concatenate([np.zeros([1, embed_dim]), emb], axis=0)
    return emb.astype(f32)


def flax_sinusoidal_init(max_len, d_feature, min_scale=1.0, max_scale=10000.0):
    """Flax examples/wmt/models.py sinusoidal_init(max_len, min_scale, max_scale)(None,
    (1, max_len, d_feature)): NumPy float64 steps into a float32 array (jnp.array keeps it)."""
    pe = np.zeros((max_len, d_feature), dtype=np.float32)
    position = np.arange(0, max_len)[:, np.newaxis]
    scale_factor = -np.log(max_scale / min_scale) / (d_feature // 2 - 1)
    div_term = min_scale * np.exp(np.arange(0, d_feature // 2) * scale_factor)
    pe[:, : d_feature // 2] = np.sin(position * div_term)
    pe[:, d_feature // 2: 2 * (d_feature // 2)] = np.cos(position * div_term)
    return pe[np.newaxis, :, :]


def timm_2d(F, feat_shape, dim=64, temperature=10000., reverse_coord=False, interleave_sin_cos=False):
    q = dim // 4
    bands = f32(1) / F.pow(f32(temperature), ar(q) / f32(q))
    fs = list(feat_shape)[::-1] if reverse_coord else list(feat_shape)
    grid = np.stack(np.meshgrid(ar(fs[0]), ar(fs[1]), indexing="ij")).reshape(2, -1).T
    pos2 = grid[:, :, None] * bands[None, None, :]
    s, c = F.sin(pos2), F.cos(pos2)
    return np.stack([s, c], axis=2 if interleave_sin_cos else 1).reshape(len(grid), -1)


# ---- rotary (3e, 6a, 6b) ----------------------------------------------------------------------

def keras_hub_rotary(F, x, max_wavelength=10000, scaling_factor=1.0, sequence_axis=1,
                     feature_axis=-1, start_index=0, positions=None):
    """keras-hub RotaryEmbedding (rope_type 'linear') on keras' torch backend, float32."""
    x = np.asarray(x, f32)
    sa, fa = sequence_axis % x.ndim, feature_axis % x.ndim
    t = np.moveaxis(x, (fa, sa), (-1, 1))
    d, h = t.shape[-1], t.shape[-1] // 2
    inv = F.pow(f32(max_wavelength), -(ar(h, 0, 2) / f32(d))) / f32(scaling_factor)
    if positions is None:
        pos = (ar(t.shape[1]) + f32(start_index))[None]
    else:
        pos = np.asarray(positions).astype(f32)
        pos = pos[None] if pos.ndim == 1 else pos
    freq = pos[:, :, None] * inv[None, None, :]
    emb = np.concatenate([freq, freq], axis=-1)  # stack((freq, freq), -2) reshaped
    for axis in range(2, t.ndim - 1):
        emb = np.expand_dims(emb, axis)
    cos, sin = F.cos(emb), F.sin(emb)
    rot = np.concatenate([-t[..., h:], t[..., :h]], axis=-1)
    return np.moveaxis(t * cos + rot * sin, (-1, 1), (fa, sa))



def rope_inv_freq(F, dim, theta):
    return f32(1.0) / F.pow(f32(theta), ar((dim + 1) // 2, 0, 2) / f32(dim))


def llama_rope(F, head_dim, position_ids, theta=10000.0):
    inv = rope_inv_freq(F, head_dim, theta)
    freqs = np.asarray(position_ids).astype(f32)[..., None] * inv
    emb = np.concatenate([freqs, freqs], axis=-1)
    return F.cos(emb), F.sin(emb)


def rotary_angles(F, dim, t, theta=10000):
    freqs = rope_inv_freq(F, dim, theta)[:dim // 2]
    a = np.asarray(t, f32)[:, None] * freqs[None, :]
    return np.repeat(a, 2, axis=-1)


def tatp22_emb(F, n, inv):
    s = ar(n)[:, None] * inv[None, :]
    return np.stack([F.sin(s), F.cos(s)], axis=-1).reshape(n, -1)


def tatp22_1d(F, channels, shape):
    B, X, ch = shape
    c = int(np.ceil(channels / 2) * 2)
    inv = f32(1.0) / F.pow(f32(10000), ar(c // 2, 0, 2) / f32(c))
    emb = np.zeros((X, c), f32)
    emb[:, :c] = tatp22_emb(F, X, inv)
    return np.repeat(emb[None, :, :ch], B, axis=0)


def tatp22_2d(F, channels, shape):
    B, X, Y, ch = shape
    c = int(np.ceil(channels / 4) * 2)
    inv = f32(1.0) / F.pow(f32(10000), ar(c // 2, 0, 2) / f32(c))
    emb = np.zeros((X, Y, 2 * c), f32)
    emb[:, :, :c] = tatp22_emb(F, X, inv)[:, None, :]
    emb[:, :, c:] = tatp22_emb(F, Y, inv)[None, :, :]
    return np.repeat(emb[None, :, :, :ch], B, axis=0)


def tatp22_3d(F, channels, shape):
    B, X, Y, Z, ch = shape
    c = int(np.ceil(channels / 6) * 2)
    inv = f32(1.0) / F.pow(f32(10000), ar(c // 2, 0, 2) / f32(c))
    emb = np.zeros((X, Y, Z, 3 * c), f32)
    emb[..., :c] = tatp22_emb(F, X, inv)[:, None, None, :]
    emb[..., c:2 * c] = tatp22_emb(F, Y, inv)[None, :, None, :]
    emb[..., 2 * c:] = tatp22_emb(F, Z, inv)[None, None, :, :]
    return np.repeat(emb[None, ..., :ch], B, axis=0)


def apply_half(x, cos, sin):
    """transformers apply_rotary_pos_emb in float32 (x (B, H, S, D), cos/sin (B, S, D))."""
    c, s = cos[:, None], sin[:, None]
    h = x.shape[-1] // 2
    rh = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * c + rh * s


def apply_pairs(x, freqs_cos, freqs_sin):
    """rotary-embedding-torch apply_rotary_emb in float32 (rot = D)."""
    x2 = x.reshape(x.shape[:-1] + (-1, 2))
    rh = np.stack([-x2[..., 1], x2[..., 0]], axis=-1).reshape(x.shape)
    return x * freqs_cos + rh * freqs_sin


# ---- ALiBi -------------------------------------------------------------------------------------

def alibi_bloom(F, attention_mask, num_heads):
    p = 2 ** math.floor(math.log2(num_heads))
    slopes = F.pow(f32(2 ** (-(2 ** -(math.log2(p) - 3)))), ar(p, 1))
    if p != num_heads:
        r = min(p, num_heads - p)
        slopes = np.concatenate([slopes, F.pow(f32(2 ** (-(2 ** -(math.log2(2 * p) - 3)))),
                                               ar(r, 1, 2))])
    m = np.asarray(attention_mask).astype(np.int64)
    arange = ((np.cumsum(m, axis=-1) - 1) * m)[:, None, :].astype(f32)
    return (slopes[..., None] * arange).reshape(m.shape[0] * num_heads, 1, m.shape[1])
