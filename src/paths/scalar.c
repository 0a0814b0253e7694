/* Scalar path of the built-in kernels: portable C, one angle at a time, through the
 * correctly rounded functions of elem/sincosf.c.  It runs on every CPU and is the reference
 * the vector paths are checked against. */
#include <string.h>

#include "elem/crmath.h"
#include "elem/half.h"
#include "paths/path.h"

static int scalar_supported(void)
{
    return 1;
}

static void scalar_rows(float *out, ptrdiff_t ostride, const float *pos, int64_t first_row,
                        int64_t nrows, const float *div, int64_t half, float dmin, float dmax)
{
    (void)dmin;
    (void)dmax;
    for (int64_t r = 0; r < nrows; r++) {
        float p = pos ? pos[r] : (float)(first_row + r);
        float *dst = out + (ptrdiff_t)r * ostride;
        for (int64_t j = 0; j < half; j++)
            sinpe_sincosf(p * div[j], &dst[2 * j], &dst[2 * j + 1]);
    }
}

void sinpe_sincos_scalar(const float *a, float *s, float *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}

static void scalar_interleave(const float *s, const float *c, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = s[i];
        dst[2 * i + 1] = c[i];
    }
}

static void scalar_add(float *x, const float *pe, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += pe[i];
}

static void scalar_scale(float *dst, const float *f, float k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = k * f[i];
}

static inline float widen(uint16_t h, int kind)
{
    return kind == SINPE_HALF_BF16 ? sinpe_bf16_to_f32(h) : sinpe_f16_to_f32(h);
}

static inline uint16_t narrow(float v, int kind)
{
    return kind == SINPE_HALF_BF16 ? sinpe_f32_to_bf16(v) : sinpe_f32_to_f16(v);
}

/* Which NaN a two-operand step returns, fixed by rule instead of left to the compiler: it may
 * commute x + y and x * y and fold a + (-b) * s into a - b * s, and each choice keeps another
 * operand's NaN (tools/convcheck counted 523,256 float16 sums and 2.4 million float32 rotations
 * of 2^24 that differed from the vector paths before this).  The rule is the one torch 2.13's
 * vector loops follow on x86-64 (measured on 2^16 NaN-heavy pairs of each dtype): a sum keeps
 * the second operand's NaN, a product too, except float16 products, which keep the first; made
 * quiet.  nan_pick(x, y, r) prefers y.  On 64-bit Arm, where torch was not measured, the
 * hardware's preference for a signalling NaN is kept in the same order.  A NaN made from
 * numbers (inf - inf, 0 * inf) is the hardware's default NaN. */
static inline float nan_pick(float x, float y, float r)
{
    uint32_t bx = sinpe_f32_bits(x), by = sinpe_f32_bits(y);
    int nx = (bx & 0x7fffffffu) > 0x7f800000u, ny = (by & 0x7fffffffu) > 0x7f800000u;
    if (!nx && !ny)
        return r;
    if (SINPE_ARM_NAN && nx && ny && (by & 0x400000u) && !(bx & 0x400000u))
        return sinpe_bits_f32(bx | 0x400000u); /* Arm: x signalling, y quiet */
    return sinpe_bits_f32((ny ? by : bx) | 0x400000u);
}

static inline float add2(float x, float y)
{
    return nan_pick(x, y, x + y);
}

static inline float mul2(float x, float y, int kind)
{
    return kind == SINPE_HALF_F16 ? nan_pick(y, x, x * y) : nan_pick(x, y, x * y);
}

static inline float neg(float x)
{
    return sinpe_bits_f32(sinpe_f32_bits(x) ^ 0x80000000u); /* torch's neg: the sign bit */
}

void sinpe_half_scalar(void *dst, const float *pe, size_t n, int kind, int add)
{
    char *d = dst;
    for (size_t k = 0; k < n; k++, d += 2) {
        float v = pe[k];
        uint16_t h;
        if (add) {
            memcpy(&h, d, 2);
            v = add2(widen(h, kind), v);
        }
        h = narrow(v, kind);
        if (SINPE_ARM_NAN && add && kind == SINPE_HALF_F16 && v != v)
            h = 0x7fffu; /* torch on 64-bit Arm: every NaN sum (engine/store.h) */
        memcpy(d, &h, 2);
    }
}

static inline float load_kind(const char *p, int kind)
{
    if (kind == SINPE_HALF_F32) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return widen(h, kind);
}

static inline void store_kind(char *p, float v, int kind)
{
    if (kind == SINPE_HALF_F32) {
        memcpy(p, &v, 4);
    } else {
        uint16_t h = narrow(v, kind);
        memcpy(p, &h, 2);
    }
}

static inline float round_kind(float v, int kind)
{
    return kind == SINPE_HALF_F32 ? v : widen(narrow(v, kind), kind);
}

/* rotate_half on n pairs (x0[i], x1[i]) with the tables' columns c0, c1, s0, s1. */
void sinpe_rope_span_scalar(char *x0, char *x1, const float *c0, const float *c1,
                            const float *s0, const float *s1, size_t n, int kind)
{
    size_t w = kind == SINPE_HALF_F32 ? 4 : 2;
    for (size_t i = 0; i < n; i++) {
        float a = load_kind(x0 + i * w, kind), b = load_kind(x1 + i * w, kind);
        float rc0 = round_kind(c0[i], kind), rs0 = round_kind(s0[i], kind);
        float rc1 = round_kind(c1[i], kind), rs1 = round_kind(s1[i], kind);
        float y0 = add2(round_kind(mul2(a, rc0, kind), kind),
                        round_kind(mul2(neg(b), rs0, kind), kind));
        float y1 = add2(round_kind(mul2(b, rc1, kind), kind), round_kind(mul2(a, rs1, kind), kind));
        store_kind(x0 + i * w, y0, kind);
        store_kind(x1 + i * w, y1, kind);
    }
}

/* n pairs with cos/sin of the kind's values (tkind F16 or BF16), widened a chunk at a time
 * (exactly: the rotation's rounding of them is then the identity). */
void sinpe_rope_span_typed(char *x0, char *x1, const char *c0, const char *c1, const char *s0,
                           const char *s1, size_t n, int kind, int tkind)
{
    enum { CHUNK = 64 };
    size_t w = kind == SINPE_HALF_F32 ? 4 : 2;
    float wc0[CHUNK], wc1[CHUNK], ws0[CHUNK], ws1[CHUNK];
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        for (size_t k = 0; k < m; k++) {
            wc0[k] = load_kind(c0 + 2 * (i + k), tkind);
            wc1[k] = load_kind(c1 + 2 * (i + k), tkind);
            ws0[k] = load_kind(s0 + 2 * (i + k), tkind);
            ws1[k] = load_kind(s1 + 2 * (i + k), tkind);
        }
        sinpe_rope_span_scalar(x0 + i * w, x1 + i * w, wc0, wc1, ws0, ws1, m, kind);
    }
}

void sinpe_rope_half_scalar(void *v, const void *c, const void *s, size_t h, int kind, int tkind)
{
    char *x0 = v, *x1 = x0 + h * (kind == SINPE_HALF_F32 ? 4 : 2);
    if (tkind == SINPE_HALF_F32) {
        const float *cf = c, *sf = s;
        sinpe_rope_span_scalar(x0, x1, cf, cf + h, sf, sf + h, h, kind);
        return;
    }
    const char *cb = c, *sb = s;
    sinpe_rope_span_typed(x0, x1, cb, cb + 2 * h, sb, sb + 2 * h, h, kind, tkind);
}

void sinpe_rope_pairs_span(char *x, ptrdiff_t step, const float *c, const float *s, size_t n,
                           int kind)
{
    for (size_t i = 0; i < n; i++) {
        char *p0 = x + (ptrdiff_t)(2 * i) * step, *p1 = p0 + step;
        float a = load_kind(p0, kind), b = load_kind(p1, kind);
        float y0 = add2(mul2(a, c[2 * i], SINPE_HALF_F32), mul2(neg(b), s[2 * i], SINPE_HALF_F32));
        float y1 = add2(mul2(b, c[2 * i + 1], SINPE_HALF_F32),
                        mul2(a, s[2 * i + 1], SINPE_HALF_F32));
        store_kind(p0, y0, kind);
        store_kind(p1, y1, kind);
    }
}

/* n pairs, the rows widened a chunk at a time when they hold the kind's values. */
void sinpe_rope_pairs_scalar(void *v, const void *c, const void *s, size_t n, int kind, int tkind)
{
    ptrdiff_t w = kind == SINPE_HALF_F32 ? 4 : 2;
    if (tkind == SINPE_HALF_F32) {
        sinpe_rope_pairs_span(v, w, c, s, n, kind);
        return;
    }
    enum { CHUNK = 64 };
    float wc[2 * CHUNK], ws[2 * CHUNK];
    const char *cb = c, *sb = s;
    for (size_t i = 0; i < n; i += CHUNK) {
        size_t m = n - i < CHUNK ? n - i : CHUNK;
        for (size_t k = 0; k < 2 * m; k++) {
            wc[k] = load_kind(cb + 2 * (2 * i + k), tkind);
            ws[k] = load_kind(sb + 2 * (2 * i + k), tkind);
        }
        sinpe_rope_pairs_span((char *)v + (ptrdiff_t)(2 * i) * w, w, wc, ws, m, kind);
    }
}

void sinpe_rope_rows_scalar(const sinpe_rope_rows *r)
{
    for (size_t k = 0; k < r->rows; k++) {
        char *v = r->v + (ptrdiff_t)k * r->vstep;
        const char *c = r->c + (ptrdiff_t)k * r->cstep, *s = r->s + (ptrdiff_t)k * r->sstep;
        if (r->pairs)
            sinpe_rope_pairs_scalar(v, c, s, r->n, r->kind, r->tkind);
        else
            sinpe_rope_half_scalar(v, c, s, r->n, r->kind, r->tkind);
    }
}

const sinpe_path_ops sinpe_path_scalar = {
    .supported = scalar_supported,
    .rows = scalar_rows,
    .sincos = sinpe_sincos_scalar,
    .interleave = scalar_interleave,
    .add = scalar_add,
    .scale = scalar_scale,
    .half = sinpe_half_scalar,
    .rope_half = sinpe_rope_half_scalar,
    .rope_pairs = sinpe_rope_pairs_scalar,
    .rope_rows = sinpe_rope_rows_scalar,
};
