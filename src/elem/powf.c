/* float32 pow as torch computes it on CPU (for the presets' frequencies).
 *
 * torch.pow of float32 tensors (x ** y with a scalar or tensor base) runs
 * aten/src/ATen/native/cpu/PowKernel.cpp through TensorIterator: with the AVX2,
 * AVX512 or NEON/SVE capabilities its vector loop takes 2 vectors per step through
 * SLEEF's Sleef_powf*_u10 and leaves the last (chunk length mod 2 vectors) elements of
 * each thread chunk (grain 32768) to std::pow, i.e. the C library's powf; with the
 * DEFAULT capability every element goes to powf.  Measured with torch 2.13.0 on x86-64
 * (capabilities DEFAULT, AVX2, AVX512: docs/presets.md).  Both functions are here:
 *
 *  - SLEEF's xpowf: sinpe_sleef_powf (sinpe_sleef_impl.h);
 *  - sinpe_powf_glibc: glibc's powf since 2.28 (sysdeps/ieee754/flt-32/e_powf.c, the
 *    same code as ARM optimized-routines math/powf.c): log2 of x from a 16-entry table
 *    and a degree-5 polynomial in double, y*log2(x), exp2 from a 32-entry table and a
 *    degree-3 polynomial, one rounding to float.  glibc runs it compiled with its
 *    multiply-adds fused (x86-64: the __powf_fma variant chosen on CPUs with FMA and
 *    AVX2; AArch64: GCC contracts them), so `fused` selects that form.
 * Tables and coefficients are the published ones (optimized-routines
 * math/powf_log2_data.c, math/exp2f_data.c).
 */
#include "elem/powf.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"
#include "elem/exp2f.h"
#include "platform/cpu.h"
#include "elem/sleef.h"

static const struct {
    double invc[16], logc[16];
    double poly[5];
    uint64_t tab[32];
    double shift_scaled;
    double c[3];
} G = {
    { 0x1.661ec79f8f3bep+0, 0x1.571ed4aaf883dp+0, 0x1.49539f0f010bp+0, 0x1.3c995b0b80385p+0,
      0x1.30d190c8864a5p+0, 0x1.25e227b0b8eap+0, 0x1.1bb4a4a1a343fp+0, 0x1.12358f08ae5bap+0,
      0x1.0953f419900a7p+0, 0x1p+0, 0x1.e608cfd9a47acp-1, 0x1.ca4b31f026aap-1,
      0x1.b2036576afce6p-1, 0x1.9c2d163a1aa2dp-1, 0x1.886e6037841edp-1, 0x1.767dcf5534862p-1 },
    { -0x1.efec65b963019p-2, -0x1.b0b6832d4fca4p-2, -0x1.7418b0a1fb77bp-2, -0x1.39de91a6dcf7bp-2,
      -0x1.01d9bf3f2b631p-2, -0x1.97c1d1b3b7afp-3, -0x1.2f9e393af3c9fp-3, -0x1.960cbbf788d5cp-4,
      -0x1.a6f9db6475fcep-5, 0x0p+0, 0x1.338ca9f24f53dp-4, 0x1.476a9543891bap-3,
      0x1.e840b4ac4e4d2p-3, 0x1.40645f0c6651cp-2, 0x1.88e9c2c1b9ff8p-2, 0x1.ce0a44eb17bccp-2 },
    { 0x1.27616c9496e0bp-2, -0x1.71969a075c67ap-2, 0x1.ec70a6ca7baddp-2, -0x1.7154748bef6c8p-1,
      0x1.71547652ab82bp0 },
    SINPE_EXP2F_TABLE,
    0x1.8p+52 / 32,
    { 0x1.c6af84b912394p-5, 0x1.ebfce50fac4f3p-3, 0x1.62e42ff0c52d6p-1 },
};

/* log2(x) for the bits ix of a positive normal x (or a normalized subnormal). */
static double log2_inline(uint32_t ix, int fused)
{
    uint32_t tmp = ix - 0x3f330000u;
    int i = (int)((tmp >> (23 - 4)) % 16);
    uint32_t top = tmp & 0xff800000u;
    uint32_t iz = ix - top;
    int k = (int32_t)top >> 23; /* arithmetic shift */
    double z = (double)sinpe_bits_f32(iz);
    double r = sinpe_madd(z, G.invc[i], -1.0, fused);
    double y0 = G.logc[i] + (double)k;
    double r2 = r * r;
    double y = sinpe_madd(G.poly[0], r, G.poly[1], fused);
    double p = sinpe_madd(G.poly[2], r, G.poly[3], fused);
    double r4 = r2 * r2;
    double q = sinpe_madd(G.poly[4], r, y0, fused);
    q = sinpe_madd(p, r2, q, fused);
    return sinpe_madd(y, r4, q, fused);
}

static float exp2_inline(double xd, uint64_t sign_bias, int fused)
{
    double kd = xd + G.shift_scaled;
    uint64_t ki = sinpe_asuint64(kd);
    kd -= G.shift_scaled;
    double r = xd - kd;
    return sinpe_exp2f_scaled(G.tab, G.c, ki, sign_bias, r, fused);
}

/* 0: not an integer, 1: odd, 2: even (iy: a nonzero finite float's bits). */
static int checkint(uint32_t iy)
{
    int e = (int)(iy >> 23 & 0xff);
    if (e < 0x7f)
        return 0;
    if (e > 0x7f + 23)
        return 2;
    if (iy & ((1u << (0x7f + 23 - e)) - 1))
        return 0;
    return iy & (1u << (0x7f + 23 - e)) ? 1 : 2;
}

static int zeroinfnan(uint32_t ix)
{
    return 2 * ix - 1 >= 2u * 0x7f800000u - 1;
}

/* x + y when one is a NaN, as glibc's x86-64 build returns it: the first operand's NaN,
 * quieted, when both are (written out: a compiler may swap the operands of a sum). */
static float nan_sum(float x, float y)
{
    uint32_t ix = sinpe_f32_bits(x);
    if (2 * ix > 2u * 0x7f800000u)
        return sinpe_bits_f32(ix | 0x00400000u);
    return sinpe_bits_f32(sinpe_f32_bits(y) | 0x00400000u);
}

/* glibc's powf; ftz: as it runs under FTZ and DAZ (XLA's threads): its float operations see
 * subnormal operands as zero (so a subnormal x normalizes to garbage bits, as there) and
 * flush subnormal results. */
static float powf_glibc(float x, float y, int fused, int ftz)
{
    uint64_t sign_bias = 0;
    uint32_t ix = sinpe_f32_bits(x), iy = sinpe_f32_bits(y);
    if (ix - 0x00800000u >= 0x7f800000u - 0x00800000u || zeroinfnan(iy)) {
        /* x < 2^-126, inf or nan; or y is 0, inf or nan (glibc's special cases) */
        if (zeroinfnan(iy)) {
            if (2 * iy == 0)
                return (ix & 0x7fc00000u) == 0x7f800000u && (ix & 0x3fffffu) ? nan_sum(x, y) : 1.0f;
            if (ix == 0x3f800000u)
                return (iy & 0x7fc00000u) == 0x7f800000u && (iy & 0x3fffffu) ? nan_sum(x, y) : 1.0f;
            if (2 * ix > 2u * 0x7f800000u || 2 * iy > 2u * 0x7f800000u)
                return nan_sum(x, y);
            if (2 * ix == 2 * 0x3f800000u)
                return 1.0f;
            if ((2 * ix < 2 * 0x3f800000u) == !(iy & 0x80000000u))
                return 0.0f;
            return y * y;
        }
        if (zeroinfnan(ix)) {
            float x2 = x * x;
            if (ix & 0x80000000u && checkint(iy) == 1)
                x2 = -x2;
            return iy & 0x80000000u ? 1.0f / x2 : x2;
        }
        if (ix & 0x80000000u) { /* finite x < 0 */
            int yint = checkint(iy);
            if (yint == 0)
                return (x - x) / (x - x); /* NaN, as __math_invalidf */
            if (yint == 1)
                sign_bias = 1u << (5 + 11);
            ix &= 0x7fffffffu;
        }
        if (ix < 0x00800000u) { /* normalize a subnormal x */
            ix = sinpe_f32_bits(ftz ? 0.0f : x * 0x1p23f);
            ix &= 0x7fffffffu;
            ix -= 23u << 23;
        }
    }
    double logx = log2_inline(ix, fused);
    double ylogx = (double)(ftz ? sinpe_flush_subnormal(y) : y) * logx;
    if ((sinpe_asuint64(ylogx) >> 47 & 0xffff) >= sinpe_asuint64(126.0) >> 47) {
        /* |y log2(x)| >= 126: glibc's overflow and underflow rules (WANT_ROUNDING and
         * WANT_ERRNO builds) */
        float inf = sign_bias ? -INFINITY : INFINITY;
        if (ylogx > 0x1.fffffffd1d571p+6)
            return inf;
        if (ylogx > 0x1.fffffffa3aae2p+6
            && ((!sign_bias && (float)-ylogx != -128.0f) || (sign_bias && -(float)ylogx != -128.0f)))
            return inf;
        if (ylogx <= -150.0)
            return sign_bias ? -0.0f : 0.0f;
        if (ylogx < -149.0) /* __math_may_uflowf: 0x1.4p-75 squared */
            return ftz ? (sign_bias ? -0.0f : 0.0f) : sign_bias ? -0x1p-149f : 0x1p-149f;
    }
    float r = exp2_inline(ylogx, sign_bias, fused);
    return ftz ? sinpe_flush_subnormal(r) : r;
}

float sinpe_powf_glibc(float x, float y, int fused)
{
    return powf_glibc(x, y, fused, 0);
}

float sinpe_powf_glibc_ftz(float x, float y, int fused)
{
    return powf_glibc(x, y, fused, 1);
}

int sinpe_glibc_powf_fused(void)
{
#if defined(__aarch64__)
    return 1; /* GCC contracts glibc's multiply-adds on AArch64 */
#elif defined(__x86_64__)
    const sinpe_cpu_info *c = sinpe_cpu();
    return c->fma && c->avx2; /* glibc's ifunc: __powf_fma */
#else
    return 0;
#endif
}

/* torch's chunks over its threads: at::parallel_for with GRAIN_SIZE 32768. */
static int64_t chunk_of(int64_t n, int threads)
{
    if (n <= 32768 || threads <= 1)
        return n > 0 ? n : 1;
    int64_t t = (n + 32767) / 32768 < threads ? (n + 32767) / 32768 : threads;
    return (n + t - 1) / t;
}

void sinpe_torch_powf(float x, const float *y, float *out, int64_t e0, int64_t n, int64_t total,
                      const sinpe_pow_profile *p)
{
    int64_t chunk = chunk_of(total, p->threads);
    sinpe_sleef_powf_fn vector_pow = sinpe_sleef_powf_for_cpu(); /* once, not per element */
    for (int64_t i = 0; i < n; i++) {
        int64_t e = e0 + i, c0 = e / chunk * chunk;
        int64_t len = total - c0 < chunk ? total - c0 : chunk;
        int64_t vec = p->lanes > 0 ? len / (2 * p->lanes) * (2 * p->lanes) : 0;
        out[i] = e - c0 < vec ? vector_pow(x, y[i], p->x86)
                 : p->system ? powf(x, y[i]) : sinpe_powf_glibc(x, y[i], p->fused);
    }
}
