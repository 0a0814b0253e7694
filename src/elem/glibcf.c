/* glibc's float32 sinf, cosf and expf (2.28 and later), re-implemented from the published
 * algorithms (sysdeps/ieee754/flt-32/s_sinf.c, s_cosf.c, e_expf.c; the same code as ARM's
 * optimized-routines).  They serve the frameworks' libm lanes: NumPy's fallback lanes, the
 * scalar tails of TensorFlow and ONNX Runtime, JAX's sin and cos.
 *
 * sinf/cosf: evaluated in double.  |x| < pi/4: the sine polynomial (x + s1 x^3 + x^7 (s2 +
 * s3 x^2)) or the cosine one (c0 + c1 x^2 + x^4 c2 + x^6 (c3 + c4 x^2)); |x| < 2^-12: x
 * (sin) or 1 (cos).  |x| < 120: n = quadrant from x * (2/pi * 2^24) truncated to int32 and
 * rounded by adding 2^23 then shifting by 24, r = x - n * pi/2 (pi/2 as one double).  Larger
 * finite x: Payne-Hanek with 4/pi to 192 bits (a 32 x 96 -> 128 bit product in 2.62 fixed
 * point), r = the fraction * pi * 2^-62.  The quadrant picks polynomial and sign; one
 * rounding to float at the end.  Worst error 0.5607 ulp (glibc's figure).
 * expf: k = round(x * 32/ln2) by the 1.5 * 2^52 shift, r = z - k, 2^(k/32) from a 32-entry
 * table with the exponent added to its bits, 2^(r/32) by a degree-3 polynomial, one rounding.
 * Special cases as glibc's WANT_ROUNDING / WANT_ERRNO build: overflow above 0x1.62e42ep6,
 * 0 below -0x1.9fe368p6, the smallest subnormal in (-103.97, -103.28) (__math_may_uflowf).
 *
 * `fused`: glibc on x86-64 ships these compiled twice and picks the FMA build on CPUs with
 * FMA and AVX2, where GCC contracts every a * b + c of the source into one fused step; each
 * such step is written here as sinpe_madd(.., fused).
 * Error against float64 sin/cos/exp on every 251st bit pattern: sin, cos 0.561 ulp
 * (|x| <= 10^4), exp 0.502 ulp (x in (-87, 88.7)).
 * Verified (tools/fwcheck.py, 2026-12-02, Intel Xeon (family 6 model 167, AVX-512 incl.
 * BW/VL/FP16, AMX), 2 cores, KVM; glibc 2.36 (its FMA variants)) against the process's own
 * sinf/cosf/expf, bit for bit, NaN payloads included: specials, subnormals and 1.4M values:
 * 0 wrong each; every 64th bit pattern (67,108,864 inputs) wrong: glibc-sin 0, glibc-cos 0,
 * glibc-exp 0, jax-sin 0, jax-cos 0; all 2^32 inputs (`fwcheck.py --fn NAME --all`, one
 * core of a shared machine):
 *   glibc-sin: 4,294,967,296 inputs, 0 wrong, 162 s;
 *   glibc-cos: 4,294,967,296 inputs, 0 wrong, 161 s;
 *   glibc-exp: 4,294,967,296 inputs, 0 wrong, 149 s.
 */
#include "elem/glibcf.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"
#include "elem/exp2f.h"

static const struct {
    double sign[4];
    double hpi_inv; /* 2/pi * 2^24 */
    double hpi;     /* pi/2 */
    double c0[2], c1[2], c2[2], c3[2], c4[2]; /* cosine polynomial; [1] negated */
    double s1, s2, s3;
    double pi63;    /* 2 pi * 2^-64 */
    uint32_t inv_pio4[24];
    uint64_t tab[32];
    double shift;   /* 1.5 * 2^52 */
    double invln2n; /* 32 / ln 2 */
    double poly[3]; /* 2^(r/32) - 1 = poly[2] r + poly[1] r^2 + poly[0] r^3 */
} G = {
    { 1.0, -1.0, -1.0, 1.0 },
    0x1.45F306DC9C883p+23,
    0x1.921FB54442D18p0,
    { 0x1p0, -0x1p0 },
    { -0x1.ffffffd0c621cp-2, 0x1.ffffffd0c621cp-2 },
    { 0x1.55553e1068f19p-5, -0x1.55553e1068f19p-5 },
    { -0x1.6c087e89a359dp-10, 0x1.6c087e89a359dp-10 },
    { 0x1.99343027bf8c3p-16, -0x1.99343027bf8c3p-16 },
    -0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13,
    0x1.921FB54442D18p-62,
    { 0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e, 0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
      0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1, 0x2757d1f5, 0x57d1f534, 0xd1f534dd,
      0xf534ddc0, 0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599, 0x6295993c, 0x95993c43,
      0x993c4390, 0x3c439041 },
    SINPE_EXP2F_TABLE,
    0x1.8p+52,
    0x1.71547652b82fep+0 * 32,
    { 0x1.c6af84b912394p-5 / 32 / 32 / 32, 0x1.ebfce50fac4f3p-3 / 32 / 32,
      0x1.62e42ff0c52d6p-1 / 32 },
};

static inline uint32_t abstop12(float x)
{
    return (sinpe_f32_bits(x) >> 20) & 0x7ff;
}

/* x + x^3 (s1 + x^2 (s2 + s3 x^2)) as glibc groups it (odd n: the cosine polynomial, table
 * entry neg: 0 or 1). */
static float poly(double x, double x2, int neg, int n, int fused)
{
    if ((n & 1) == 0) {
        double x3 = x * x2;
        double s1 = sinpe_madd(x2, G.s3, G.s2, fused);
        double x7 = x3 * x2;
        double s = sinpe_madd(x3, G.s1, x, fused);
        return (float)sinpe_madd(x7, s1, s, fused);
    }
    double x4 = x2 * x2;
    double c2 = sinpe_madd(x2, G.c4[neg], G.c3[neg], fused);
    double c1 = sinpe_madd(x2, G.c1[neg], G.c0[neg], fused);
    double x6 = x4 * x2;
    double c = sinpe_madd(x4, G.c2[neg], c1, fused);
    return (float)sinpe_madd(x6, c2, c, fused);
}

/* |x| in [pi/4, 120): the quadrant by the scaled truncation, r = x - n pi/2. */
static double reduce_fast(double x, int *np, int fused)
{
    double r = x * G.hpi_inv;
    int n = ((int32_t)r + 0x800000) >> 24;
    *np = n;
    return sinpe_madd(-(double)n, G.hpi, x, fused);
}

/* Payne-Hanek for finite |x| >= 120 (bits xi, sign ignored). */
static double reduce_large(uint32_t xi, int *np)
{
    const uint32_t *arr = &G.inv_pio4[(xi >> 26) & 15];
    int shift = (xi >> 23) & 7;
    xi = (xi & 0xffffff) | 0x800000;
    xi <<= shift;
    uint64_t r0 = (uint64_t)(uint32_t)(xi * arr[0]);
    uint64_t r1 = (uint64_t)xi * arr[4];
    uint64_t r2 = (uint64_t)xi * arr[8];
    r0 = (r2 >> 32) | (r0 << 32);
    r0 += r1;
    uint64_t n = (r0 + (1ULL << 61)) >> 62;
    r0 -= n << 62;
    *np = (int)n;
    return (double)(int64_t)r0 * G.pi63;
}

static float sincos_common(float y, int want_cos, int fused)
{
    double x = y;
    int n;
    uint32_t top = abstop12(y);
    if (top < abstop12(0x1.921FB6p-1f)) { /* pi/4 rounded to float */
        if (top < abstop12(0x1p-12f))
            return want_cos ? 1.0f : y;
        return poly(x, x * x, 0, want_cos, fused);
    }
    if (top < abstop12(120.0f)) {
        x = reduce_fast(x, &n, fused);
        double s = G.sign[n & 3];
        return poly(x * s, x * x, (n & 2) != 0, n ^ want_cos, fused);
    }
    if (top < abstop12(INFINITY)) {
        uint32_t xi = sinpe_f32_bits(y);
        int sign = (int)(xi >> 31);
        x = reduce_large(xi, &n);
        double s = G.sign[(n + sign) & 3];
        return poly(x * s, x * x, ((n + sign) & 2) != 0, n ^ want_cos, fused);
    }
    if (y != y)
        return y + y; /* a NaN: quieted, payload kept */
    return sinpe_bits_f32(SINPE_X86_DEFAULT_NAN); /* (y - y) / (y - y) on x86-64 */
}

float sinpe_glibc_sinf(float x, int fused)
{
    return sincos_common(x, 0, fused);
}

float sinpe_glibc_cosf(float x, int fused)
{
    return sincos_common(x, 1, fused);
}

float sinpe_glibc_expf(float x, int fused)
{
    uint32_t abstop = (sinpe_f32_bits(x) >> 20) & 0x7ff;
    if (abstop >= (sinpe_f32_bits(88.0f) >> 20)) {
        if (sinpe_f32_bits(x) == sinpe_f32_bits(-INFINITY))
            return 0.0f;
        if (abstop >= (sinpe_f32_bits(INFINITY) >> 20))
            return x + x;
        if (x > 0x1.62e42ep6f)
            return INFINITY;
        if (x < -0x1.9fe368p6f)
            return 0.0f;
        if (x < -0x1.9d1d9ep6f)
            return 0x1p-149f;
    }
    double xd = x;
    double z = G.invln2n * xd;
    double kd = z + G.shift;
    uint64_t ki = sinpe_asuint64(kd);
    kd -= G.shift;
    double r = sinpe_madd(G.invln2n, xd, -kd, fused); /* the FMA build contracts z - kd */
    return sinpe_exp2f_scaled(G.tab, G.poly, ki, 0, r, fused);
}

/* glibc's logf (2.27 and later, sysdeps/ieee754/flt-32/e_logf.c): x = 2^k z with z in
 * [0x3f330000, 2 * 0x3f330000) as bits, c from a 16-entry table near z (its 1/c and log c),
 * log x = log1p(z/c - 1) + log c + k ln 2 with log1p by a degree-4 polynomial, in double, one
 * rounding.  ULP error 0.818 (glibc's figure; 416,747 of the positive finite floats differ
 * from the float64 log rounded).  Subnormals normalised first; 0 -> -inf, inf -> inf, a
 * negative or NaN -> NaN. */
static const struct {
    double invc[16], logc[16];
    double ln2;
    double poly[3];
} L = {
    { 0x1.661ec79f8f3bep+0, 0x1.571ed4aaf883dp+0, 0x1.49539f0f010bp+0, 0x1.3c995b0b80385p+0,
      0x1.30d190c8864a5p+0, 0x1.25e227b0b8eap+0, 0x1.1bb4a4a1a343fp+0, 0x1.12358f08ae5bap+0,
      0x1.0953f419900a7p+0, 0x1p+0, 0x1.e608cfd9a47acp-1, 0x1.ca4b31f026aap-1,
      0x1.b2036576afce6p-1, 0x1.9c2d163a1aa2dp-1, 0x1.886e6037841edp-1, 0x1.767dcf5534862p-1 },
    { -0x1.57bf7808caadep-2, -0x1.2bef0a7c06ddbp-2, -0x1.01eae7f513a67p-2, -0x1.b31d8a68224e9p-3,
      -0x1.6574f0ac07758p-3, -0x1.1aa2bc79c81p-3, -0x1.a4e76ce8c0e5ep-4, -0x1.1973c5a611cccp-4,
      -0x1.252f438e10c1ep-5, 0x0p+0, 0x1.aa5aa5df25984p-5, 0x1.c5e53aa362eb4p-4,
      0x1.526e57720db08p-3, 0x1.bc2860d22477p-3, 0x1.1058bc8a07ee1p-2, 0x1.4043057b6ee09p-2 },
    0x1.62e42fefa39efp-1,
    { -0x1.00ea348b88334p-2, 0x1.5575b0be00b6ap-2, -0x1.ffffef20a4123p-2 },
};

float sinpe_glibc_logf(float x, int fused)
{
    uint32_t ix = sinpe_f32_bits(x);
    if (ix == 0x3f800000u)
        return 0.0f;
    if (ix - 0x00800000u >= 0x7f800000u - 0x00800000u) { /* not a positive normal */
        if (ix * 2 == 0)
            return -INFINITY;
        if (ix == 0x7f800000u)
            return x;
        if ((ix & 0x80000000u) || ix * 2 >= 0xff000000u)
            return (ix * 2 > 0xff000000u) ? x + x : sinpe_bits_f32(SINPE_X86_DEFAULT_NAN);
        ix = sinpe_f32_bits(x * 0x1p23f) - (23u << 23); /* a subnormal, normalised */
    }
    uint32_t tmp = ix - 0x3f330000u;
    int i = (int)((tmp >> 19) % 16), k = (int32_t)tmp >> 23;
    double z = (double)sinpe_bits_f32(ix - (tmp & 0xff800000u));
    double r = sinpe_madd(z, L.invc[i], -1.0, fused);
    double y0 = sinpe_madd((double)k, L.ln2, L.logc[i], fused);
    double r2 = r * r;
    double y = sinpe_madd(L.poly[1], r, L.poly[2], fused);
    y = sinpe_madd(L.poly[0], r2, y, fused);
    return (float)sinpe_madd(y, r2, y0 + r, fused);
}
