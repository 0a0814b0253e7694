/* Eigen's float pow packet (Eigen/src/Core/arch/Default/GenericPacketMathFunctions.h:
 * generic_pow, generic_pow_impl, accurate_log2<float>, generic_exp2) as TensorFlow 2.20 and
 * 2.21 pin it (the algorithm of Eigen 1ea61a5d2, 2024-11-26, "Improve pow(x,y)"; TensorFlow
 * 2.15 to 2.19's older one is elem/fw_eigen219_pow.c), in its AVX build without FMA: each pmadd is a multiply, then
 * an add, and the double-word products are Dekker's with Veltkamp's split (4097 x).  Every
 * lane is independent of the others, so one element is one call.
 *
 * Method: |x| = m 2^e with m in [1/sqrt2, sqrt2) (frexp, then m doubled below 1/sqrt2);
 * log2(m) as a double word: t = m - 1, a degree-8 polynomial in t by Horner (float), then
 * the last two Horner steps and the final product by t in double-word arithmetic with the
 * constants 1.4426950417421103 and -0.7213475158826866 split in two floats; y e and
 * y log2(m) as double words, summed; split into an integer n (round half away from zero,
 * twice: the high part, then the low part's carry) and r in [-1/2, 1/2]; 2^r = exp(ln2 r)
 * as exp(hi) (Eigen's pexp, elem/fw_eigen.c) times (1 + lo) of the product ln2 x r; scaled
 * by 2^n (exactly, unless the result is subnormal: flushed).  Then the C library's special
 * cases in Eigen's order of selects: negative x with a non-integer y NaN, x = 0, odd
 * integer y with x's sign, |y| >= 128 ln2 / eps (744261117.95...) by |x| against 1, infinite
 * x, NaN x or y (the quiet NaN 0x7fc00000), y = 1 gives x (as it came: a subnormal x is
 * not flushed there), x = 1 or y = 0 gives 1.
 * ftz: TensorFlow's MXCSR FTZ and DAZ: arguments and every intermediate result that is
 * subnormal count as a zero of their sign.
 * Verified against tensorflow-cpu 2.21.0's tf.pow (eager, lengths multiples of 8; its last
 * n % 8 elements are glibc's powf, the backend's rule), bit for bit, on the AMD EPYC Zen 4
 * (family 25 model 17), 2026-12-04: `tools/fwcheck.py --fn glibc-pow` (tf-pow: 2,000,512
 * pairs: 10000 to the keras exponents, x in (0, 100) with y in (-10, 10), random bit
 * patterns) 0 wrong; a probe of 16.8M pairs (those kinds, x near 1 with |y| to 10^4,
 * results over the whole exponent range and into the subnormals, negative x with integer
 * y, every pair of 33 specials) 0 wrong.  Two arguments: no exhaustive check.
 */
#include "elem/fwmath.h"

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "elem/bits.h"

#define KC0 1.442695041742110273474963832995854318141937255859375e+00
#define KC1 (-7.2134751588268664068692714863573201000690460205078125e-01)

static const struct {
    float c0_hi, c0_lo, c1_hi, c1_lo;
    float poly[9]; /* t^8 .. t^0 of log2(1 + t) / t beyond its last two terms */
    float sqrt_half, ln2, split, round_half, huge_y, max_cap, min_cap;
} P = {
    (float)KC0, (float)(KC0 - (double)(float)KC0), (float)KC1, (float)(KC1 - (double)(float)KC1),
    { 9.7010828554630279541015625e-02f, -1.6896486282348632812500000e-01f,
      1.7200836539268493652343750e-01f, -1.7892272770404815673828125e-01f,
      2.0505344867706298828125000e-01f, -2.4046677350997924804687500e-01f,
      2.8857553005218505859375000e-01f, -3.6067414283752441406250000e-01f,
      4.8089790344238281250000000e-01f },
    0.70710678118654752440f, 0.693147180559945309417232121458176568f, 4097.0f,
    0.4999999702f /* 0x3effffff */, (128 * 0.693147180559945309417232121458176568f) / FLT_EPSILON,
    129.0f, -151.0f,
};

typedef struct {
    int ftz;
} mode;

/* A result as the FPU leaves it: subnormal to a zero of its sign under FTZ. */
static float fl(const mode *m, float x)
{
    return m->ftz ? sinpe_flush_subnormal(x) : x;
}

static float add(const mode *m, float a, float b) { return fl(m, a + b); }
static float sub(const mode *m, float a, float b) { return fl(m, a - b); }
static float mul(const mode *m, float a, float b) { return fl(m, a * b); }

/* s_hi + s_lo = a + b exactly, s_hi = fl(a + b), for |a| >= |b|. */
static void fast_twosum(const mode *m, float a, float b, float *hi, float *lo)
{
    float s = add(m, a, b);
    *lo = sub(m, b, sub(m, s, a));
    *hi = s;
}

static void split(const mode *m, float x, float *hi, float *lo)
{
    float g = mul(m, P.split, x);
    *hi = add(m, sub(m, x, g), g);
    *lo = sub(m, x, *hi);
}

/* Dekker's product: hi = fl(x y), hi + lo = x y (each multiply-add two roundings). */
static void twoprod(const mode *m, float x, float y, float *hi, float *lo)
{
    float xh, xl, yh, yl;
    split(m, x, &xh, &xl);
    split(m, y, &yh, &yl);
    float p = mul(m, x, y);
    float l = add(m, mul(m, xh, yh), -p);
    l = add(m, mul(m, xh, yl), l);
    l = add(m, mul(m, xl, yh), l);
    l = add(m, mul(m, xl, yl), l);
    *hi = p;
    *lo = l;
}

/* (xh + xl) y as a double word. */
static void twoprod_dw(const mode *m, float xh, float xl, float y, float *hi, float *lo)
{
    float ch, cl1, th, tl1;
    twoprod(m, xh, y, &ch, &cl1);
    float cl2 = mul(m, xl, y);
    fast_twosum(m, ch, cl2, &th, &tl1);
    fast_twosum(m, th, add(m, tl1, cl1), hi, lo);
}

/* (xh + xl) + (yh + yl), |xh| >= |yh|. */
static void fast_twosum_dw(const mode *m, float xh, float xl, float yh, float yl, float *hi,
                           float *lo)
{
    float rh, rl;
    fast_twosum(m, xh, yh, &rh, &rl);
    fast_twosum(m, rh, add(m, add(m, yl, rl), xl), hi, lo);
}

/* log2(z) for z in [1/sqrt2, sqrt2) as a double word. */
static void log2_dw(const mode *m, float z, float *hi, float *lo)
{
    float t = sub(m, z, 1.0f);
    float p = P.poly[0];
    for (int i = 1; i < 9; i++)
        p = add(m, mul(m, p, t), P.poly[i]);
    float ph, pl;
    twoprod(m, t, p, &ph, &pl);
    fast_twosum_dw(m, P.c1_hi, P.c1_lo, ph, pl, &ph, &pl);
    twoprod_dw(m, ph, pl, t, &ph, &pl);
    fast_twosum_dw(m, P.c0_hi, P.c0_lo, ph, pl, &ph, &pl);
    twoprod_dw(m, ph, pl, t, hi, lo);
}

/* Round half away from zero as Eigen's AVX pround: trunc(a + copysign(0.49999997, a)). */
static float round_away(const mode *m, float a)
{
    return truncf(add(m, a, copysignf(P.round_half, a)));
}

/* min and max as _mm256_min_ps(b, a) / _mm256_max_ps(b, a): a NaN a is returned. */
static float pmin(float a, float b) { return b < a ? b : a; }
static float pmax(float a, float b) { return b > a ? b : a; }

/* 2^x for x in [-1/2, 1/2]: exp(hi) (1 + lo) of the product ln2 x. */
static float exp2_small(const mode *m, float x)
{
    float h, l;
    twoprod(m, P.ln2, pmax(pmin(x, P.max_cap), P.min_cap), &h, &l);
    return mul(m, sinpe_eigen_expf(h, m->ftz), add(m, 1.0f, l));
}

/* a 2^n, n integral: 2^n from its bits when |n| <= 126, else in four factors (the vector
 * code's choice per packet gives these bits per lane: they differ only where a result is
 * subnormal, which FTZ flushes either way). */
static float scale(const mode *m, float a, float n)
{
    if (n != n) /* a NaN argument's lane: its result is replaced by the special cases */
        return n;
    if (!(fabsf(n) > 126.0f)) {
        float e = pmin(pmax(n + 127.0f, 0.0f), 255.0f);
        return mul(m, a, sinpe_bits_f32((uint32_t)(int32_t)e << 23));
    }
    float e = pmin(pmax(n, -278.0f), 278.0f);
    int32_t ei = (int32_t)e, b = ei >= 0 ? ei / 4 : -((3 - ei) / 4); /* floor(e / 4) */
    float c = sinpe_bits_f32((uint32_t)(b + 127) << 23);
    float out = mul(m, mul(m, mul(m, a, c), c), c);
    c = sinpe_bits_f32((uint32_t)(ei - 3 * b + 127) << 23);
    return mul(m, out, c);
}

/* Eigen's generic_pow_impl for x = |x| >= 0. */
static float pow_impl(const mode *m, float x, float y)
{
    uint32_t u = sinpe_f32_bits(x);
    float mx = x, ex = 0.0f, off = -126.0f;
    if (x != 0.0f && (u >> 23) == 0u) { /* subnormal (no DAZ): normalized by 2^24 first */
        u = sinpe_f32_bits(x * 16777216.0f);
        off -= 24.0f;
    }
    if (x != 0.0f && (u >> 23) != 255u) { /* zero, inf, NaN: mantissa x, exponent 0 */
        mx = sinpe_bits_f32((u & 0x807fffffu) | 0x3f000000u);
        ex = (float)(int32_t)(u >> 23) + off;
    }
    if (mx < P.sqrt_half) {
        mx = mul(m, 2.0f, mx);
        ex = sub(m, ex, 1.0f);
    }
    float rh, rl, f1h, f1l, f2h, f2l, fh, flo;
    log2_dw(m, mx, &rh, &rl);
    twoprod(m, ex, y, &f1h, &f1l);
    twoprod_dw(m, rh, rl, y, &f2h, &f2l);
    fast_twosum_dw(m, f1h, f1l, f2h, f2l, &fh, &flo);
    float nz = round_away(m, fh);
    float rz = add(m, sub(m, fh, nz), flo);
    float nr = round_away(m, rz);
    rz = sub(m, rz, nr);
    nz = add(m, nz, nr);
    return scale(m, exp2_small(m, rz), nz);
}

static float neg(float x)
{
    return sinpe_bits_f32(sinpe_f32_bits(x) ^ 0x80000000u);
}

float sinpe_eigen_powf(float x, float y, int ftz)
{
    mode md = { ftz }, *m = &md;
    float x0 = x; /* y = 1 selects x itself: a blend, no arithmetic (a subnormal stays) */
    x = fl(m, x);
    y = fl(m, y);
    float ax = fabsf(x), ay = fabsf(y), inf = INFINITY;
    float pw = pow_impl(m, ax, y);
    int y_int = floorf(y) == y && ay != inf;
    float half = mul(m, y, 0.5f);
    int y_odd = y_int && !(round_away(m, half) == half);
    if (x < 0.0f && !y_int)
        pw = NAN;
    if (x == 0.0f)
        pw = y < 0.0f ? inf : 0.0f;
    if ((sinpe_f32_bits(x) >> 31) && y_odd)
        pw = neg(pw);
    if (ay >= P.huge_y) {
        float v = ((y < 0.0f && x == 0.0f) || ((y < 0.0f) != (1.0f < ax))) ? inf : 0.0f;
        pw = x == -1.0f ? 1.0f : v;
    }
    if (ax == inf) {
        float vp = y < 0.0f ? 0.0f : inf;
        pw = x < 0.0f ? (y_odd ? neg(vp) : vp) : vp;
    }
    if (x != x || y != y)
        pw = sinpe_bits_f32(0x7fc00000u);
    if (y == 1.0f)
        return x0;
    if (x == 1.0f || y == 0.0f)
        return 1.0f;
    return pw;
}
