"""The inference engines' own rotations, driven as their users drive them (the oracles of the
producers, docs/engines.md): ONNX Runtime's RotaryEmbedding (contrib and ONNX opset 23),
OpenVINO's fused RoPE node, MLX's ``mx.fast.rope`` and torch.compile (inductor).  Each takes
x of shape (batch, seq, heads, head_dim) and transformers' full-width cos/sin tables of shape
(batch, seq, rot) for its positions, builds the engine's cache from them as an exporter does,
and returns the engine's output as a NumPy array of x's dtype.  Imported by the live tests
(pytest -m engines) and by tools/engines_record.py; imports an engine only when called.
"""
import numpy as np

import ml_dtypes

LAYOUTS = ("half", "pairs")


def cache_of(cos, layout):
    """The engine's half-width cache of a full-width table: the first half of transformers'
    halves, every other column of the interleaved pairs."""
    r = cos.shape[-1]
    return cos[..., : r // 2] if layout == "half" else cos[..., 0::2]


def positional_cache(cos, sin, layout, dtype):
    """(cos_cache, sin_cache, position_ids) for an engine that gathers its cache by position:
    each (batch, seq) row of the tables becomes a cache row of its own."""
    b, s, r = cos.shape
    cc = np.ascontiguousarray(cache_of(cos, layout).reshape(b * s, r // 2)).astype(dtype)
    ss = np.ascontiguousarray(cache_of(sin, layout).reshape(b * s, r // 2)).astype(dtype)
    pos = np.arange(b * s, dtype=np.int64).reshape(b, s)
    return cc, ss, pos


def onnxruntime_session(shape, dtype, cache_rows, pos_shape, rot, layout, opset23=False,
                        threads=1):
    """An ONNX Runtime 1.32 session of one RotaryEmbedding on the CPU provider: the contrib
    com.microsoft op (x as (batch, seq, heads * head_dim)) or ONNX's opset-23 op; inputs x,
    pos (int64, pos_shape), cos and sin (cache_rows x rot / 2, x's dtype)."""
    import onnxruntime as ort
    from onnx import TensorProto, helper
    b, s, h, d = shape
    et = {np.dtype(np.float32): TensorProto.FLOAT,
          np.dtype(np.float16): TensorProto.FLOAT16}[np.dtype(dtype)]
    inter = int(layout == "pairs")
    if opset23:
        node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                                interleaved=inter, num_heads=h, rotary_embedding_dim=rot)
        ops = [helper.make_opsetid("", 23)]
    else:
        node = helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"],
                                domain="com.microsoft", interleaved=inter, num_heads=h,
                                rotary_embedding_dim=rot)
        ops = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    shape3 = (b, s, h * d)
    cache = (cache_rows, rot // 2)
    g = helper.make_graph(
        [node], "rope",
        [helper.make_tensor_value_info("x", et, shape3),
         helper.make_tensor_value_info("pos", TensorProto.INT64, pos_shape),
         helper.make_tensor_value_info("cos", et, cache),
         helper.make_tensor_value_info("sin", et, cache)],
        [helper.make_tensor_value_info("y", et, shape3)])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def onnxruntime(x, cos, sin, layout, opset23=False):
    """ONNX Runtime 1.32's RotaryEmbedding on the CPU provider, one intra-op thread: the
    contrib com.microsoft op (x as (batch, seq, heads * head_dim)) or ONNX's opset-23 op."""
    b, s, h, d = x.shape
    cc, ss, pos = positional_cache(cos, sin, layout, x.dtype)
    sess = onnxruntime_session(x.shape, x.dtype, cc.shape[0], pos.shape, cos.shape[-1], layout,
                               opset23)
    y = sess.run(None, {"x": np.ascontiguousarray(x).reshape(b, s, h * d), "pos": pos,
                        "cos": cc, "sin": ss})[0]
    return y.reshape(x.shape)


def inductor(x, cos, sin, layout):
    """torch.compile (inductor, CPU) of transformers' rotation (halves) or of the interleaved
    pairs' rotate_half (rotary-embedding-torch's), q of shape (batch, seq, heads, head_dim)
    with the tables unsqueezed at 2; partial rotation as GPT-NeoX writes it."""
    import torch
    dt = {np.dtype(np.float32): torch.float32, np.dtype(np.float16): torch.float16,
          np.dtype(ml_dtypes.bfloat16): torch.bfloat16}[x.dtype]
    q = torch.from_numpy(np.ascontiguousarray(x).view(np.uint16) if dt == torch.bfloat16
                         else np.ascontiguousarray(x))
    if dt == torch.bfloat16:
        q = q.view(torch.bfloat16)
    # transformers casts its tables to q's dtype; rotary-embedding-torch keeps float32 ones
    # (torch promotes the products) and casts the result back
    tdt = dt if layout == "half" else torch.float32
    c = torch.from_numpy(np.ascontiguousarray(cos, np.float32)).to(tdt)
    s_ = torch.from_numpy(np.ascontiguousarray(sin, np.float32)).to(tdt)
    fn = _compiled(layout)
    torch._dynamo.reset()
    y = fn(q, c, s_).to(dt)
    return y.view(torch.int16).numpy().view(x.dtype) if dt != torch.float32 else y.numpy()


def _compiled(layout):
    import torch

    def rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat((-x[..., h:], x[..., :h]), dim=-1)

    def rotate_pairs(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((-x2, x1), dim=-1).flatten(-2)

    rot = rotate_half if layout == "half" else rotate_pairs

    def apply(q, cos, sin):
        r = cos.shape[-1]
        cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
        qr, qp = q[..., :r], q[..., r:]
        return torch.cat(((qr * cos) + (rot(qr) * sin), qp), dim=-1)

    return torch.compile(apply, fullgraph=True, dynamic=False)


def transformers_tables(positions, rot, base=10000.0, layout="half"):
    """cos/sin (float32) of shape (batch, seq, rot) for positions (batch, seq) in transformers'
    layout of the halves ``cat(freqs, freqs)``, or the interleaved pairs'
    ``repeat_interleave(freqs, 2)`` (NumPy's; the producers take the tables as given, so any
    bits serve)."""
    inv = (1.0 / (np.float32(base) ** (np.arange(0, rot, 2, dtype=np.float32) / np.float32(rot))))
    f = np.asarray(positions, np.float32)[..., None] * inv.astype(np.float32)
    emb = np.concatenate((f, f), -1) if layout == "half" else np.repeat(f, 2, -1)
    return np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)


def np_dtype(name):
    """A dtype name's NumPy dtype (bfloat16: ml_dtypes')."""
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def uint_view(a):
    """An array's bits as unsigned integers of its width."""
    return np.ascontiguousarray(a).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def storable(a):
    """bfloat16 arrays as their uint16 bits (an .npz keeps NumPy's own dtypes only)."""
    return uint_view(a) if a.dtype == np.dtype(ml_dtypes.bfloat16) else a


def openvino(x, cos, sin, layout, bf16=False):
    """OpenVINO's CPU plugin (one thread) on the graph an exporter writes, fused into its RoPE
    node (asserted): transformers' rotate_half of q (batch, seq, heads, head_dim) transposed to
    (batch, heads, seq, head_dim), cos/sin gathered by position from constants of the tables'
    own dtype (converted to x's when they differ, as the traced cast is); the interleaved pairs
    as GPT-J's rotate_every_two, its sincos constant gathered and repeat-interleaved.  bf16:
    the plugin's default precision (bfloat16 on CPUs with AVX512-BF16), else hint f32."""
    import openvino as ov
    import openvino.opset13 as ops
    b, s, h, d = x.shape
    rot = cos.shape[-1]
    big = np.iinfo(np.int32).max
    ovt = {np.dtype(np.float32): ov.Type.f32, np.dtype(np.float16): ov.Type.f16,
           np.dtype(ml_dtypes.bfloat16): ov.Type.bf16}

    def c(v, dt=np.int64):
        return ops.constant(np.array(v, dtype=dt))

    def table(t):  # a constant of the table's dtype (bfloat16 through float32, exact)
        dt = np.dtype(t.dtype)
        return (ops.constant(np.asarray(t, np.float32), dtype=ov.Type.bf16)
                if dt == np.dtype(ml_dtypes.bfloat16) else ops.constant(np.ascontiguousarray(t)))

    def to_x(node):
        return node if node.get_output_element_type(0) == ovt[x.dtype] else ops.convert(node, ovt[x.dtype])

    xp = ops.parameter(ov.PartialShape([-1, -1, -1, d]), ovt[x.dtype], name="x")
    pp = ops.parameter(ov.PartialShape([-1, -1]), ov.Type.i64, name="pos")
    pos = np.arange(b * s, dtype=np.int64).reshape(b, s)
    cosr, sinr = cos.reshape(b * s, rot), sin.reshape(b * s, rot)
    if layout == "half":
        xt = ops.transpose(xp, c([0, 2, 1, 3]))
        cg = to_x(ops.unsqueeze(ops.gather(table(cosr), pp, c(0)), c(1)))
        sg = to_x(ops.unsqueeze(ops.gather(table(sinr), pp, c(0)), c(1)))
        xr = ops.slice(xt, c([0]), c([rot]), c([1]), c([3])) if rot < d else xt
        x1 = ops.slice(xr, c([0]), c([rot // 2]), c([1]), c([3]))
        x2 = ops.slice(xr, c([rot // 2]), c([big]), c([1]), c([3]))
        minus = ops.constant(np.array(-1.0, np.float32), dtype=ovt[x.dtype])
        rh = ops.concat([ops.multiply(x2, minus), x1], -1)
        y = ops.add(ops.multiply(xr, cg), ops.multiply(rh, sg))
        if rot < d:
            y = ops.concat([y, ops.slice(xt, c([rot]), c([big]), c([1]), c([3]))], -1)
    else:
        sc = np.concatenate([sinr[:, 0::2], cosr[:, 0::2]], -1)
        g = ops.gather(table(sc), pp, c(0))
        vs = ops.variadic_split(g, c(-1), c([rot // 2, -1]))
        idx = c(np.repeat(np.arange(rot // 2), 2), np.int32)
        sin_r, cos_r = (to_x(ops.gather(ops.unsqueeze(vs.output(k), c(2)), idx, c(3)))
                        for k in (0, 1))
        xr = ops.slice(xp, c([0]), c([rot]), c([1]), c([3])) if rot < d else xp
        odd = ops.slice(xr, c([1]), c([big]), c([2]), c([3]))
        even = ops.slice(xr, c([0]), c([big]), c([2]), c([3]))
        minus = ops.constant(np.array(-1.0, np.float32), dtype=ovt[x.dtype])
        st = ops.concat([ops.unsqueeze(ops.multiply(odd, minus), c(-1)),
                         ops.unsqueeze(even, c(-1))], -1)
        y = ops.add(ops.multiply(xr, cos_r),
                    ops.multiply(ops.reshape(st, c([0, 0, 0, -1]), True), sin_r))
        if rot < d:
            y = ops.concat([y, ops.slice(xp, c([rot]), c([big]), c([1]), c([3]))], -1)
    cfg = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1}
    if not bf16:
        cfg["INFERENCE_PRECISION_HINT"] = "f32"
    cm = ov.Core().compile_model(ov.Model([y], [xp, pp], "rope"), "CPU", cfg)
    kinds = [str(op.get_rt_info()["layerType"].value) for op in cm.get_runtime_model().get_ordered_ops()]
    # GPT-J's pattern fuses with its pass-through columns only: over the whole head the
    # graph runs op by op (what the producer reproduces there), asserted so either way
    fused = layout == "half" or rot < d
    assert ("RoPE" in kinds and "Eltwise" not in kinds) == fused, \
        f"OpenVINO {'did not fuse' if fused else 'fused'} the rotation: {kinds}"
    xin = x
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        xin = ov.Tensor(ov.Type.bf16, list(x.shape))
        xin.data[...] = np.ascontiguousarray(x).view(np.float16)
    out = cm.create_infer_request().infer({"x": xin, "pos": pos})[cm.outputs[0]]
    out = np.array(out)
    if x.dtype == np.dtype(ml_dtypes.bfloat16):
        out = out.view(np.uint16).view(ml_dtypes.bfloat16)
    return np.ascontiguousarray(out.transpose(0, 2, 1, 3)) if layout == "half" else out


def mlx(x, rot, base, layout, offset=0, freqs=None):
    """MLX's ``mx.fast.rope`` on the CPU stream: q (batch, seq, heads, head_dim) as MLX takes
    it, (batch, heads, seq, head_dim); dims = rot, traditional for the pairs; freqs: its
    freqs= (base then None)."""
    import mlx.core as mx
    dt = {np.dtype(np.float32): mx.float32, np.dtype(np.float16): mx.float16,
          np.dtype(ml_dtypes.bfloat16): mx.bfloat16}[x.dtype]
    xt = np.ascontiguousarray(np.asarray(x, np.float32).transpose(0, 2, 1, 3))
    a = mx.array(xt).astype(dt)
    with mx.stream(mx.cpu):
        y = mx.fast.rope(a, rot, traditional=layout == "pairs",
                         base=None if freqs is not None else float(base), scale=1.0,
                         offset=int(offset),
                         freqs=None if freqs is None else mx.array(np.asarray(freqs, np.float32)))
        y = np.array(y.astype(mx.float32))
    return y.astype(x.dtype).transpose(0, 2, 1, 3)


#: producers whose NaN results are NaNs of the engine's own sign and payload, which sinpe does
#: not reproduce (docs/engines.md): a NaN is compared as a NaN, every other value by its bits
NAN_ANY = ("openvino", "openvino-bf16", "mlx", "llama.cpp")


def differ(got, want, producer):
    """How many values of got differ from want in their bits (for NAN_ANY producers, a NaN
    where both are NaN counts as the same; a NaN against a number never does)."""
    bad = _bits(got) != _bits(want)
    if producer in NAN_ANY:
        g, w = np.asarray(got, np.float32), np.asarray(want, np.float32)
        bad &= ~(np.isnan(g) & np.isnan(w))
    return int(np.count_nonzero(bad))


def _bits(a):
    return uint_view(np.asarray(a))
