/* MLX's float32 exp, sin and cos on the CPU (MLX 0.32, mlx/backend/cpu/simd/math.h), the
 * functions mx.exp, mx.sin and mx.cos and mx.fast.rope's CPU graph run on x86-64 Linux,
 * re-implemented from their published description.  Every fused step below is a real fma
 * (MLX's simd code calls it); every other operation is its own float32 rounding.
 *
 * exp: NaN returns itself; x > 88 gives inf, x < -88 gives 0.  Else t = x * log2(e) rounded
 * to float32, n = floor(t + 1/2) in double, f = t - n (exact), 2^f by a degree-6 polynomial
 * in Horner form (six fmas), times 2^n made from the exponent bits.
 * sin, cos (Cephes' sinf/cosf): |x| > 2^23 (and infinities) go to the C library (glibc's
 * sinf/cosf, its FMA build).  Else j = trunc(|x| * 4/pi) rounded up to even, r = |x| - j *
 * pi/4 in three fma steps (pi/4 split as 0.78515625 + 2.4187564849853515625e-4 +
 * 3.77489497744594108e-8), both polynomials of r^2 evaluated (sine degree 7, cosine degree
 * 8), the octant picking which and the sign.
 * Verified against mx.exp / mx.sin / mx.cos of MLX 0.32.4 (mlx[cpu] wheel, x86-64 Linux,
 * AMD EPYC Zen 4, 2026-12-07): all 2^32 float32 inputs each, bit for bit, 0 differ
 * (tools/fwcheck.py's MLX functions re-check it). */
#include "elem/fwmath.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"
#include "elem/glibcf.h"

static const struct {
    float log2e;
    float exp_poly[7];     /* 2^f: highest degree first */
    float four_over_pi;
    float pio4[3];         /* -pi/4 in three parts */
    float cos_poly[3];     /* cosine: z^2 (c0 + c1 z + c2 z^2) - z/2 + 1 */
    float sin_poly[3];     /* sine: x + x z (s0 + s1 z + s2 z^2) */
    float big;             /* 2^23: larger arguments go to the C library */
} M = {
    1.442695f,
    { 1.535336188319500e-4f, 1.339887440266574e-3f, 9.618437357674640e-3f,
      5.550332471162809e-2f, 2.402264791363012e-1f, 6.931472028550421e-1f, 1.0f },
    1.27323954473516f,
    { -0.78515625f, -2.4187564849853515625e-4f, -3.77489497744594108e-8f },
    { 2.443315711809948e-5f, -1.388731625493765e-3f, 4.166664568298827e-2f },
    { -1.9515295891e-4f, 8.3321608736e-3f, -1.6666654611e-1f },
    8388608.0f,
};

float sinpe_mlx_expf(float x)
{
    if (isnan(x))
        return x;
    if (x > 88.0f)
        return INFINITY;
    if (x < -88.0f)
        return 0.0f;
    float t = x * M.log2e;
    float n = (float)floor((double)t + 0.5);
    float f = t - n;
    float p = M.exp_poly[0];
    for (int k = 1; k < 7; k++)
        p = fmaf(p, f, M.exp_poly[k]);
    return sinpe_bits_f32((uint32_t)(((int32_t)n + 127) << 23)) * p;
}

/* Cephes' octant reduction and both polynomials; want_sin picks the result. */
static float mlx_sincos(float x, int want_sin)
{
    float ax = fabsf(x);
    if (ax > M.big) /* also the infinities */
        return want_sin ? sinpe_glibc_sinf(x, 1) : sinpe_glibc_cosf(x, 1);
    int neg = x < 0.0f; /* not for -0 or NaN */
    float y = ax * M.four_over_pi;
    uint32_t j = isnan(y) ? 0u : (uint32_t)y; /* x86-64 truncates a NaN to 0 here */
    j = (j + 1u) & ~1u;
    y = (float)j;
    float r = ax;
    for (int k = 0; k < 3; k++)
        r = fmaf(y, M.pio4[k], r);
    float z = r * r;
    float c = fmaf(z, M.cos_poly[0], M.cos_poly[1]);
    float s = fmaf(z, M.sin_poly[0], M.sin_poly[1]);
    c = fmaf(c, z, M.cos_poly[2]);
    s = fmaf(s, z, M.sin_poly[2]);
    c = c * z;
    s = s * z;
    c = c * z;
    s = fmaf(r, s, r);
    c = fmaf(z, -0.5f, c);
    c = c + 1.0f;
    int swap = (j & 2u) != 0;
    if (want_sin) {
        float v = swap ? c : s;
        return neg ^ ((j & 4u) != 0) ? -v : v;
    }
    float v = swap ? s : c;
    return ((j - 2u) & 4u) != 0 ? v : -v;
}

float sinpe_mlx_sinf(float x)
{
    return mlx_sincos(x, 1);
}

float sinpe_mlx_cosf(float x)
{
    return mlx_sincos(x, 0);
}
