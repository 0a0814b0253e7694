#!/usr/bin/env python3
"""Benchmarks of the presets and apply_rope: sinpe against each library's own function,
measured in one run, interleaved rounds, medians (as bench.py).

    pip install '.[test]' && pip install --no-deps -r tests/oracles-nodeps.txt
    python benchmarks/presets.py [--repeats 7] [--threads 1]

Where the library cannot be installed here (fairseq, fairseq2, tensor2tensor, MAE) the
other side is its operation list as the tests run it (tests/preset_oracles.py, on torch);
library/sinpe > 1 means sinpe is faster. sinpe and torch run at the same thread count;
sinpe's backend is 'auto' (torch's bits: torch is imported).
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
os.environ.setdefault("KERAS_BACKEND", "torch")

import sinpe  # noqa: E402
from sinpe import presets as P  # noqa: E402
import preset_oracles as O  # noqa: E402
from bench import cpu_name, interleaved  # noqa: E402


def families():
    import diffusers.models.embeddings as de
    import keras_hub
    import whisper.model as wm
    from positional_encodings.torch_encodings import PositionalEncoding1D, PositionalEncoding2D
    from rotary_embedding_torch import RotaryEmbedding, apply_rotary_emb
    from transformers import LlamaConfig
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding as M2M
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding as Marian
    from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "numerics"))
    from test_numerics_presets import timm_pos_embed_sincos
    timm = timm_pos_embed_sincos()
    ts = torch.arange(4096).float()
    cfg = LlamaConfig(hidden_size=128 * 32, num_attention_heads=32,
                      rope_parameters={"rope_type": "default", "rope_theta": 500000.0})
    rope = LlamaRotaryEmbedding(cfg)
    pid = torch.arange(8192)[None]
    rot = RotaryEmbedding(128)
    keras_layer = keras_hub.layers.SinePositionEncoding()
    kx = np.zeros((1, 2048, 1024), np.float32)
    krot = keras_hub.layers.RotaryEmbedding()
    kq = np.random.default_rng(0).standard_normal((1, 2048, 8, 128)).astype(np.float32)
    mask = torch.ones(4, 2048, dtype=torch.int64)
    q = torch.randn(4, 32, 1024, 128)
    qn = q.numpy().copy()
    cos, sin = rope(q, torch.arange(1024)[None].expand(4, -1))
    rfreqs = rot(torch.arange(1024).float())
    return [
        ("fairseq", "transformers M2M100 get_embedding (fairseq's copy)", "8192x1024",
         lambda: P.fairseq(8192, 1024, 1), lambda: M2M.get_embedding(8192, 1024, 1)),
        ("fairseq2", "operation list on torch (tests/preset_oracles.py)", "4096x1024",
         lambda: P.fairseq2(1024, 4096), lambda: O.fairseq2(O.TorchF, 1024, 4096)),
        ("tensor2tensor", "operation list on torch", "4096x1024",
         lambda: P.tensor2tensor(4096, 1024), lambda: O.tensor2tensor(O.TorchF, 4096, 1024)),
        ("keras_hub", "keras-hub SinePositionEncoding (torch backend)", "2048x1024",
         lambda: P.keras_hub(kx), lambda: keras_layer(kx)),
        ("keras_hub_rotary", "keras-hub RotaryEmbedding (torch backend)", "1x2048x8x128",
         lambda: P.keras_hub_rotary(kq), lambda: krot(kq)),
        ("tf_tutorial", "the tutorial's NumPy function", "2048x512",
         lambda: P.tf_tutorial(2048, 512), lambda: O.tf_tutorial(2048, 512)),
        ("flax_sinusoidal_init", "Flax's NumPy initializer (tests/preset_oracles.py)", "2048x512",
         lambda: P.flax_sinusoidal_init(2048, 512), lambda: O.flax_sinusoidal_init(2048, 512)),
        ("xlm", "transformers create_sinusoidal_embeddings", "512x768",
         lambda: P.xlm(512, 768), lambda: create_sinusoidal_embeddings(512, 768, torch.empty(512, 768))),
        ("marian", "transformers Marian create_weight", "512x768",
         lambda: P.marian(512, 768), lambda: Marian(512, 768).create_weight()),
        ("whisper", "openai-whisper sinusoids", "1500x1280",
         lambda: P.whisper(1500, 1280), lambda: wm.sinusoids(1500, 1280)),
        ("diffusers_timestep", "diffusers get_timestep_embedding", "4096x1280",
         lambda: P.diffusers_timestep(ts.numpy(), 1280, True, 0),
         lambda: de.get_timestep_embedding(ts, 1280, True, 0)),
        ("mae_2d", "diffusers get_2d_sincos_pos_embed (MAE's math)", "1024 x 64x64",
         lambda: P.mae_2d(1024, 64), lambda: de.get_2d_sincos_pos_embed(1024, 64, base_size=64)),
        ("timm_2d", "timm build_sincos2d_pos_embed", "768 x 64x64",
         lambda: P.timm_2d([64, 64], 768), lambda: timm.build_sincos2d_pos_embed([64, 64], 768)),
        ("llama_rope", "transformers LlamaRotaryEmbedding forward", "8192x128",
         lambda: P.llama_rope(128, np.arange(8192)[None], 500000.0), lambda: rope(q, pid)),
        ("rotary_embedding_torch", "rotary-embedding-torch RotaryEmbedding(t)", "8192x128",
         lambda: P.rotary_embedding_torch(128, 8192), lambda: rot(torch.arange(8192).float())),
        ("tatp22_1d", "positional-encodings PositionalEncoding1D", "1x4096x1024",
         lambda: P.tatp22_1d(1024, (1, 4096, 1024)),
         lambda: PositionalEncoding1D(1024)(torch.zeros(1, 4096, 1024))),
        ("tatp22_2d", "positional-encodings PositionalEncoding2D", "1x64x64x768",
         lambda: P.tatp22_2d(768, (1, 64, 64, 768)),
         lambda: PositionalEncoding2D(768)(torch.zeros(1, 64, 64, 768))),
        ("alibi_bias", "transformers build_alibi_tensor", "4x2048, 32 heads",
         lambda: P.alibi_bias(mask.numpy(), 32), lambda: build_alibi_tensor(mask, 32, torch.float32)),
        ("apply_rope (half)", "transformers apply_rotary_pos_emb (q only, with its cos/sin)",
         "4x32x1024x128", lambda: sinpe.apply_rope(qn, np.arange(1024)),
         lambda: apply_rotary_pos_emb(q, q[:, :1], cos, sin)[0]),
        ("apply_rope (half), cos/sin included", "LlamaRotaryEmbedding + apply_rotary_pos_emb",
         "4x32x1024x128", lambda: sinpe.apply_rope(qn, np.arange(1024)),
         lambda: apply_rotary_pos_emb(q, q[:, :1], *rope(q, torch.arange(1024)[None]))[0]),
        ("apply_rope (pairs)", "rotary-embedding-torch apply_rotary_emb (with its freqs)",
         "4x32x1024x128", lambda: sinpe.apply_rope(qn, layout="pairs"),
         lambda: apply_rotary_emb(rfreqs, q)),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    sinpe.set_threads(a.threads)
    print(f"machine: {cpu_name()}, {os.cpu_count()} CPUs; torch {torch.__version__}, "
          f"threads {a.threads}; sinpe backend {sinpe.numerics()['backend']}")
    print("| preset | library function | size | sinpe ms | library ms | library/sinpe |")
    print("|---|---|---|---|---|---|")
    for name, lib, size, ours, theirs in families():
        reps = 3 if name in ("xlm", "marian") else a.repeats  # their Python loops take ~1 s
        t = interleaved({"sinpe": ours, "lib": theirs}, reps)
        print(f"| {name} | {lib} | {size} | {t['sinpe'] * 1e3:.2f} | {t['lib'] * 1e3:.2f} | "
              f"{t['lib'] / t['sinpe']:.1f} |", flush=True)


if __name__ == "__main__":
    main()
