/* The loops of a vector code path, written once and compiled per instruction set (paths
 * layer): a path file defines its lane operations, then includes this header, which
 * defines its sin/cos (paths/sincos_body.h) and its table of functions (sinpe_path_ops)
 * from them, as SLEEF compiles one body per target through a helper header.
 *
 * The path file defines:
 *   PATH_OPS              the name of its table (sinpe_path_avx2, ...)
 *   PATH_SUPPORTED        int (*)(void): the CPU (and OS) can run it
 *   PATH_TARGET           the function attribute its code needs (or nothing)
 *   angle vectors, PATH_W floats, computed in double lanes:
 *     PATH_VF, PATH_LOAD(p), PATH_STORE(p, v), PATH_SET1(x), PATH_MUL(a, b)
 *     the double lanes' operations paths/sincos_body.h lists: from them it compiles the
 *     sin and cos of PATH_W floats (FN(sincos_f)), correctly rounded but for the lanes
 *     of the returned bit mask (redone here by the scalar kernel)
 *     PATH_STORE_PAIRS(dst, s, c)      dst[2i] = s[i], dst[2i+1] = c[i], i < PATH_W
 *   store vectors, PATH_SW floats (the widest float vector):
 *     PATH_SF, PATH_SLOAD(p), PATH_SSTORE(p, v), PATH_SADD(a, b), PATH_SMUL(a, b),
 *     PATH_SSET1(x)
 *     PATH_SPAIRS(dst, s, c)           dst[2i] = s[i], dst[2i+1] = c[i], i < PATH_SW
 *     PATH_ALIGN                       bytes the add aligns its stores to
 *   with PATH_HALF defined, the element conversions of PATH_SW lanes (elem/half.h's rules):
 *     PATH_OADD(a, b), PATH_OMUL(a, b) sum, product keeping b's NaN when both are NaN
 *     PATH_SNEG(v)                     sign flipped (bits)
 *     PATH_H2F(p), PATH_F2H(p, v)      float16 at p (unaligned) widened, or v rounded to it
 *     PATH_B2F(p), PATH_F2B(p, v)      the same for bfloat16
 *     PATH_RH(v), PATH_RB(v)           v rounded to float16 / bfloat16 and widened back
 *   (without it, the conversions and rotations are the scalar path's).
 * Every function does its lanes' operations in the order the scalar code would, so the
 * bits do not depend on the path (each lane is correctly rounded, or redone).
 * Which NaN: where both operands of a step can be NaN (x + pe, a rotation's products and
 * sum), the result keeps the second operand's NaN (a float16 product: the first), as
 * torch's vector loops do on x86-64
 * (docs/numerics.md, "NaN payloads").  An intrinsic does not fix that (the compiler may
 * commute a + b), so the conversions' paths write those steps with PATH_OADD / PATH_OMUL
 * (inline assembly on x86); the scalar path applies the rule explicitly (paths/scalar.c,
 * nan_pick).
 */
#include <stddef.h>
#include <stdint.h>

#include "elem/crmath.h"
#include "paths/path.h"

#define PATH_CAT2(a, b) a##_##b
#define PATH_CAT(a, b) PATH_CAT2(a, b)
#define FN(name) PATH_CAT(PATH_OPS, name)

#include "paths/sincos_body.h"

/* W interleaved sin/cos pairs; the lanes in mask redone by the scalar kernel. */
PATH_TARGET static inline void FN(pairs)(float *dst, PATH_VF a, PATH_VF s, PATH_VF c,
                                         unsigned mask)
{
    PATH_STORE_PAIRS(dst, s, c);
    if (mask) {
        float av[PATH_W];
        PATH_STORE(av, a);
        for (int l = 0; l < PATH_W; l++)
            if ((mask >> l) & 1)
                sinpe_sincosf(av[l], &dst[2 * l], &dst[2 * l + 1]);
    }
}

PATH_TARGET static void FN(rows)(float *out, ptrdiff_t ostride, const float *positions,
                                 int64_t first_row, int64_t nrows, const float *div,
                                 int64_t half, float dmin, float dmax)
{
    for (int64_t r = 0; r < nrows; r++) {
        float pos = positions ? positions[r] : (float)(first_row + r);
        int checked = sinpe_row_needs_range_test(pos, dmin, dmax);
        PATH_VF vp = PATH_SET1(pos);
        float *dst = out + (ptrdiff_t)r * ostride;
        int64_t j = 0;
        for (; j + 2 * PATH_W <= half; j += 2 * PATH_W) { /* two independent chains */
            PATH_VF a0 = PATH_MUL(vp, PATH_LOAD(div + j));
            PATH_VF a1 = PATH_MUL(vp, PATH_LOAD(div + j + PATH_W));
            PATH_VF s0, c0, s1, c1;
            unsigned m0 = FN(sincos_f)(a0, &s0, &c0, checked);
            unsigned m1 = FN(sincos_f)(a1, &s1, &c1, checked);
            FN(pairs)(dst + 2 * j, a0, s0, c0, m0);
            FN(pairs)(dst + 2 * j + 2 * PATH_W, a1, s1, c1, m1);
        }
        for (; j + PATH_W <= half; j += PATH_W) {
            PATH_VF a0 = PATH_MUL(vp, PATH_LOAD(div + j)), s0, c0;
            unsigned m0 = FN(sincos_f)(a0, &s0, &c0, checked);
            FN(pairs)(dst + 2 * j, a0, s0, c0, m0);
        }
        for (; j < half; j++)
            sinpe_sincosf(pos * div[j], &dst[2 * j], &dst[2 * j + 1]);
    }
}

/* Block sin/cos of n floats (the presets', the oneMKL rows' and the tools'). */
PATH_TARGET static void FN(sincos)(const float *a, float *s, float *c, size_t n)
{
    size_t i = 0;
    for (; i + PATH_W <= n; i += PATH_W) {
        PATH_VF sv, cv;
        unsigned m = FN(sincos_f)(PATH_LOAD(a + i), &sv, &cv, 1);
        PATH_STORE(s + i, sv);
        PATH_STORE(c + i, cv);
        for (int l = 0; m && l < PATH_W; l++)
            if ((m >> l) & 1)
                sinpe_sincosf(a[i + l], &s[i + l], &c[i + l]);
    }
    for (; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}

PATH_TARGET static void FN(interleave)(const float *s, const float *c, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + PATH_SW <= n; i += PATH_SW)
        PATH_SPAIRS(dst + 2 * i, PATH_SLOAD(s + i), PATH_SLOAD(c + i));
    for (; i < n; i++) {
        dst[2 * i] = s[i];
        dst[2 * i + 1] = c[i];
    }
}

/* x[j] += pe[j]: the first values one by one until x is PATH_ALIGN-aligned (the PE scratch
 * shares x's offset, so both are then aligned), then by two vectors. */
PATH_TARGET static void FN(add)(float *x, const float *pe, size_t n)
{
    size_t j = 0;
    for (; j < n && ((uintptr_t)(x + j) & (PATH_ALIGN - 1)) != 0; j++)
        x[j] += pe[j];
    for (; j + 2 * PATH_SW <= n; j += 2 * PATH_SW) {
        PATH_SF a = PATH_SADD(PATH_SLOAD(x + j), PATH_SLOAD(pe + j));
        PATH_SF b = PATH_SADD(PATH_SLOAD(x + j + PATH_SW), PATH_SLOAD(pe + j + PATH_SW));
        PATH_SSTORE(x + j, a);
        PATH_SSTORE(x + j + PATH_SW, b);
    }
    for (; j < n; j++)
        x[j] += pe[j];
}

/* dst[j] = k * f[j], by two vectors. */
PATH_TARGET static void FN(scale)(float *dst, const float *f, float k, size_t n)
{
    size_t j = 0;
    PATH_SF kv = PATH_SSET1(k);
    for (; j + 2 * PATH_SW <= n; j += 2 * PATH_SW) {
        PATH_SF a = PATH_SMUL(kv, PATH_SLOAD(f + j));
        PATH_SF b = PATH_SMUL(kv, PATH_SLOAD(f + j + PATH_SW));
        PATH_SSTORE(dst + j, a);
        PATH_SSTORE(dst + j + PATH_SW, b);
    }
    for (; j < n; j++)
        dst[j] = k * f[j];
}

#ifdef PATH_HALF
#define PATH_INLINE PATH_TARGET static inline __attribute__((always_inline))

PATH_INLINE PATH_SF FN(round)(PATH_SF v, int kind)
{
    return kind == SINPE_HALF_F16 ? PATH_RH(v) : kind == SINPE_HALF_BF16 ? PATH_RB(v) : v;
}

/* a * b keeping b's NaN, or a's for float16 (paths/scalar.c, nan_pick) */
PATH_INLINE PATH_SF FN(mul)(PATH_SF a, PATH_SF b, int kind)
{
    return kind == SINPE_HALF_F16 ? PATH_OMUL(b, a) : PATH_OMUL(a, b);
}

PATH_INLINE PATH_SF FN(load)(const char *p, int kind)
{
    if (kind == SINPE_HALF_F16)
        return PATH_H2F(p);
    if (kind == SINPE_HALF_BF16)
        return PATH_B2F(p);
    return PATH_SLOAD((const float *)(const void *)p);
}

/* v rounded to the kind and stored (rounding twice is rounding once: r(w(r(v))) = r(v)) */
PATH_INLINE void FN(store)(char *p, PATH_SF v, int kind)
{
    if (kind == SINPE_HALF_F16)
        PATH_F2H(p, v);
    else if (kind == SINPE_HALF_BF16)
        PATH_F2B(p, v);
    else
        PATH_SSTORE((float *)(void *)p, v);
}

PATH_INLINE void FN(half_body)(char *d, const float *pe, size_t n, int kind, int add)
{
    size_t i = 0;
    for (; i + PATH_SW <= n; i += PATH_SW) {
        PATH_SF v = PATH_SLOAD(pe + i);
        if (add)
            v = PATH_OADD(FN(load)(d + 2 * i, kind), v);
        FN(store)(d + 2 * i, v, kind);
    }
    if (i < n)
        sinpe_half_scalar(d + 2 * i, pe + i, n - i, kind, add);
}

PATH_TARGET static void FN(half)(void *dst, const float *pe, size_t n, int kind, int add)
{
    if (kind == SINPE_HALF_F16)
        add ? FN(half_body)(dst, pe, n, SINPE_HALF_F16, 1) : FN(half_body)(dst, pe, n, SINPE_HALF_F16, 0);
    else
        add ? FN(half_body)(dst, pe, n, SINPE_HALF_BF16, 1) : FN(half_body)(dst, pe, n, SINPE_HALF_BF16, 0);
}

/* tkind: the rows' values (paths/path.h, rope_half): of the kind itself (tkind == kind)
 * they are loaded as x is and not rounded again */
PATH_INLINE PATH_SF FN(table)(const char *t, size_t i, int kind, int tkind)
{
    if (tkind == SINPE_HALF_F32)
        return FN(round)(PATH_SLOAD((const float *)(const void *)t + i), kind);
    return FN(load)(t + 2 * i, tkind);
}

PATH_INLINE void FN(rope_body)(char *v, const char *c, const char *s, size_t h, int kind,
                               int tkind)
{
    size_t w = kind == SINPE_HALF_F32 ? 4 : 2, i = 0;
    char *x0 = v, *x1 = v + h * w;
    for (; i + PATH_SW <= h; i += PATH_SW) {
        PATH_SF a = FN(load)(x0 + i * w, kind), b = FN(load)(x1 + i * w, kind);
        PATH_SF c0 = FN(table)(c, i, kind, tkind), s0 = FN(table)(s, i, kind, tkind);
        PATH_SF c1 = FN(table)(c, h + i, kind, tkind);
        PATH_SF s1 = FN(table)(s, h + i, kind, tkind);
        PATH_SF y0 = PATH_OADD(FN(round)(FN(mul)(a, c0, kind), kind),
                               FN(round)(FN(mul)(PATH_SNEG(b), s0, kind), kind));
        PATH_SF y1 = PATH_OADD(FN(round)(FN(mul)(b, c1, kind), kind),
                               FN(round)(FN(mul)(a, s1, kind), kind));
        FN(store)(x0 + i * w, y0, kind);
        FN(store)(x1 + i * w, y1, kind);
    }
    if (i == h)
        return;
    if (tkind == SINPE_HALF_F32) {
        const float *cf = (const float *)(const void *)c, *sf = (const float *)(const void *)s;
        sinpe_rope_span_scalar(x0 + i * w, x1 + i * w, cf + i, cf + h + i, sf + i, sf + h + i,
                               h - i, kind);
        return;
    }
    sinpe_rope_span_typed(x0 + i * w, x1 + i * w, c + 2 * i, c + 2 * (h + i), s + 2 * i,
                          s + 2 * (h + i), h - i, kind, tkind);
}

/* A pairs row's vector at element i: float32 values, or the kind's own widened */
PATH_INLINE PATH_SF FN(prow)(const char *t, size_t i, int tkind)
{
    if (tkind == SINPE_HALF_F32)
        return PATH_SLOAD((const float *)(const void *)t + i);
    return FN(load)(t + 2 * i, tkind);
}

/* rope_pairs (paths/path.h) a vector of PATH_SW elements at a time: x * c + swap(x) * s, swap
 * putting -b where a was and a where b was (PATH_SWAPNEG), in float32 by the ordered ops. */
PATH_INLINE void FN(pairs_body)(char *v, const char *c, const char *s, size_t n, int kind,
                                int tkind)
{
    size_t w = kind == SINPE_HALF_F32 ? 4 : 2, tw = tkind == SINPE_HALF_F32 ? 4 : 2, i = 0;
    for (; i + PATH_SW <= 2 * n; i += PATH_SW) {
        PATH_SF x = FN(load)(v + i * w, kind);
        PATH_SF y = PATH_OADD(PATH_OMUL(x, FN(prow)(c, i, tkind)),
                              PATH_OMUL(PATH_SWAPNEG(x), FN(prow)(s, i, tkind)));
        FN(store)(v + i * w, y, kind);
    }
    if (i < 2 * n)
        sinpe_rope_pairs_scalar(v + i * w, c + i * tw, s + i * tw, n - i / 2, kind, tkind);
}

/* r's rows with the kinds and the layout as constants (rope_rows dispatches once) */
PATH_INLINE void FN(rows_body)(const sinpe_rope_rows *r, int pairs, int kind, int tkind)
{
    for (size_t k = 0; k < r->rows; k++) {
        char *v = r->v + (ptrdiff_t)k * r->vstep;
        const char *c = r->c + (ptrdiff_t)k * r->cstep, *s = r->s + (ptrdiff_t)k * r->sstep;
        if (pairs)
            FN(pairs_body)(v, c, s, r->n, kind, tkind);
        else
            FN(rope_body)(v, c, s, r->n, kind, tkind);
    }
}

/* r's rows by layout and kinds as constants: x's kind with float32 rows or its own */
PATH_INLINE void FN(rows_kinds)(const sinpe_rope_rows *r, int pairs)
{
    int t = r->tkind;
    if (r->kind == SINPE_HALF_F32)
        FN(rows_body)(r, pairs, SINPE_HALF_F32, SINPE_HALF_F32);
    else if (r->kind == SINPE_HALF_F16)
        t == SINPE_HALF_F32 ? FN(rows_body)(r, pairs, SINPE_HALF_F16, SINPE_HALF_F32)
                            : FN(rows_body)(r, pairs, SINPE_HALF_F16, SINPE_HALF_F16);
    else
        t == SINPE_HALF_F32 ? FN(rows_body)(r, pairs, SINPE_HALF_BF16, SINPE_HALF_F32)
                            : FN(rows_body)(r, pairs, SINPE_HALF_BF16, SINPE_HALF_BF16);
}

/* The one dispatch of the rotations (rope_half and rope_pairs are its one-row calls): rows
 * of another type than float32 or x's own go to the scalar path, which widens them. */
PATH_TARGET static void FN(rope_rows)(const sinpe_rope_rows *r)
{
    if (r->tkind != SINPE_HALF_F32 && r->tkind != r->kind)
        sinpe_rope_rows_scalar(r);
    else if (r->pairs)
        FN(rows_kinds)(r, 1);
    else
        FN(rows_kinds)(r, 0);
}

PATH_TARGET static void FN(rope_half)(void *v, const void *c, const void *s, size_t h, int kind,
                                      int tkind)
{
    sinpe_rope_rows r = { .v = v, .c = c, .s = s, .rows = 1, .n = h, .kind = kind,
                          .tkind = tkind, .pairs = 0 };
    FN(rope_rows)(&r);
}

PATH_TARGET static void FN(rope_pairs)(void *v, const void *c, const void *s, size_t n, int kind,
                                       int tkind)
{
    sinpe_rope_rows r = { .v = v, .c = c, .s = s, .rows = 1, .n = n, .kind = kind,
                          .tkind = tkind, .pairs = 1 };
    FN(rope_rows)(&r);
}
#undef PATH_INLINE
#define PATH_HALF_OPS .half = FN(half), .rope_half = FN(rope_half), .rope_pairs = FN(rope_pairs), \
                      .rope_rows = FN(rope_rows)
#else
#define PATH_HALF_OPS .half = sinpe_half_scalar, .rope_half = sinpe_rope_half_scalar,            \
                      .rope_pairs = sinpe_rope_pairs_scalar, .rope_rows = sinpe_rope_rows_scalar
#endif

const sinpe_path_ops PATH_OPS = {
    .supported = PATH_SUPPORTED,
    .rows = FN(rows),
    .sincos = FN(sincos),
    .interleave = FN(interleave),
    .add = FN(add),
    .scale = FN(scale),
    PATH_HALF_OPS,
};
#undef PATH_HALF_OPS

#undef FN
#undef PATH_CAT
#undef PATH_CAT2
