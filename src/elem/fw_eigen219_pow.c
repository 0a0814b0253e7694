/* Eigen's float pow packet as TensorFlow 2.15 to 2.19 pin it (the Eigen headers shipped in
 * the tensorflow-cpu 2.19.1 wheel, tensorflow/include/Eigen/src/Core/arch/Default/
 * GenericPacketMathFunctions.h: generic_pow, generic_pow_impl, accurate_log2<float>,
 * fast_accurate_exp2<float>), in TensorFlow's AVX build without FMA: every multiply-add is
 * a multiply, then an add (two roundings), and the exact products are Dekker's with
 * Veltkamp's split (4097 x).  Every lane is independent of the others, so one element is
 * one call.
 *
 * What differs from the pow of TensorFlow 2.20/2.21 (sinpe_eigen_powf, fw_eigen_pow.c):
 *  - log2 of the mantissa m in [1/sqrt2, sqrt2): t = m - 1; log2(1 + t) / t is a degree-10
 *    polynomial whose 7 high coefficients (degree 4 to 10) are float and evaluated in float
 *    as two interleaved Horner chains in t^2 (even and odd), joined by one step in t; its 4
 *    low coefficients are double words (hi + lo floats), applied by 4 double-word steps
 *    (q = C_k + q t), then the final product by t: 5 double-word products by t, against 3
 *    (and a degree-8 float Horner chain in t, and 2 double-word constants) in 2.21;
 *  - 2^r for r in [-1/2, 1/2]: its own polynomial 1 + r (C + r P(r)), P of degree 4 in float
 *    (even and odd chains in r^2), C = ln2 as a double word, the last steps in double-word
 *    arithmetic (a general two-sum with C, a double-word product by r, a fast two-sum with
 *    1), against 2.21's Eigen pexp(hi) (1 + lo) of the product ln2 r;
 *  - the scaling by 2^n always in four factors (Eigen's generic pldexp);
 *  - the special cases as one chain of selects over predicates (y = 1 gives x, then 1, NaN,
 *    +-inf, -0, 0, then the signed result), the C99 Annex F values.
 * The argument reduction (frexp, m doubled below 1/sqrt2), the double-word y e + y log2(m)
 * and the two roundings half away from zero (trunc(a + copysign(0.49999997, a))) are the same.
 *
 * ftz: TensorFlow's MXCSR FTZ and DAZ: arguments and every intermediate result that is
 * subnormal count as a zero of their sign (y = 1 returns x's bits, a blend: a subnormal x
 * is not flushed there).
 *
 * Eigen history (eigen-mirror/eigen): this file's text is Eigen's GenericPacketMathFunctions.h
 * from 9000b3767 (2024-04-30) to before 6331da95e (2024-07-30); the pow algorithm itself is
 * be0574e21 (2021-02-17).  TensorFlow 2.20 took 5610a13b7 (2024-11-20, "Simplify and speed up
 * pow()": fast_accurate_exp2<float> removed, 2^r by generic_exp2) and 1ea61a5d2 (2024-11-26,
 * "Improve pow(x,y)": the degree-8 log2 with 2 double-word constants).
 * Verified against tensorflow-cpu 2.19.1's tf.pow (eager, two float32 arrays of lengths that are
 * multiples of 8), compared as uint32, on the AMD EPYC Zen 4 (family 25 model 17), 2026-12-07:
 * 40,754,664 pairs (base ** (k / d), k * (1/d) for 20 bases x 20 d x 16,384 k; x in (0, 100) with
 * y in (-10, 10); random bit patterns; x near 1 with |y| to 1e9; results 2^-160 to 2^135;
 * negative x with integer and half-integer y; the huge-y threshold; every pair of 37 specials)
 * 0 differ.  The last n % 8 elements of an op are glibc's powf under FTZ/DAZ, flushed (not
 * this function): 5.6M elements at 89 lengths, 2-d shapes and a scalar base, 0 differ.
 *
 * Built with the core's -ffp-contract=off: every multiply and add is rounded on its own (there
 * is no FMA in TensorFlow's AVX build).
 */
#include "elem/fwmath.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"

#define bits_of sinpe_f32_bits
#define of_bits sinpe_bits_f32

/* ---- constants ------------------------------------------------------------------------- */

/* log2(1 + t) / t ~ C0 + t (C1 + t (C2 + t (C3 + t Q(t)))), Q of degree 6 in float. */
static const float LQ[7] = { /* t^0 .. t^6 of Q */
    0x1.278084p-2f,  -0x1.ec7a16p-3f, 0x1.a3edbep-3f,  -0x1.6e6766p-3f,
    0x1.605fb4p-3f,  -0x1.5a3faep-3f, 0x1.8d7632p-4f,
};
static const float LC_HI[4] = { 0x1.715476p+0f, -0x1.715476p-1f, 0x1.ec708p-2f, -0x1.71549p-2f };
static const float LC_LO[4] = { 0x1.5a89cp-26f, -0x1.4cef2ep-28f, -0x1.f1bd44p-27f,
                                -0x1.a5720cp-28f };

/* 2^r ~ 1 + r (C + r E(r)), E of degree 4 in float, C = ln2 as hi + lo. */
static const float EQ[5] = { 0x1.ebfbdep-3f, 0x1.c6aed2p-5f, 0x1.3b2c02p-7f, 0x1.5f465ep-10f,
                             0x1.42dc06p-13f };
static const float EC_HI = 0x1.62e43p-1f, EC_LO = 0x1.96e1d4p-26f;

#define SQRT_HALF 0.70710678118654752440f
#define ROUND_HALF 0x1.fffffep-2f /* the float just below 1/2 */
/* |y| from which x^y is 0 or inf for any x != 1: 128 ln2 / FLT_EPSILON in float */
#define HUGE_Y ((128.0f * 0.693147180559945309417232121458176568f) / 0x1p-23f)

/* ---- the FPU as TensorFlow sets it ----------------------------------------------------- */

typedef struct {
    int ftz;
} mode;

static float fl(const mode *m, float v)
{
    if (m->ftz && v != 0.0f && fabsf(v) < 0x1p-126f)
        return of_bits(bits_of(v) & 0x80000000u);
    return v;
}

static float add(const mode *m, float a, float b) { return fl(m, a + b); }
static float sub(const mode *m, float a, float b) { return fl(m, a - b); }
static float mul(const mode *m, float a, float b) { return fl(m, a * b); }
/* a multiply-add without FMA: two roundings */
static float madd(const mode *m, float a, float b, float c) { return add(m, mul(m, a, b), c); }

/* ---- double-word arithmetic ------------------------------------------------------------ */

typedef struct {
    float hi, lo;
} dw;

/* hi = fl(a + b), hi + lo = a + b exactly when |a| >= |b|. */
static dw qsum(const mode *m, float a, float b)
{
    dw r;
    r.hi = add(m, a, b);
    r.lo = sub(m, b, sub(m, r.hi, a));
    return r;
}

/* hi + lo = v, hi with the upper half of v's significand (factor 2^12 + 1). */
static dw vsplit(const mode *m, float v)
{
    dw r;
    float g = mul(m, 4097.0f, v);
    r.hi = add(m, sub(m, v, g), g);
    r.lo = sub(m, v, r.hi);
    return r;
}

/* Dekker: hi = fl(a b), hi + lo = a b. */
static dw prod(const mode *m, float a, float b)
{
    dw sa = vsplit(m, a), sb = vsplit(m, b), r;
    r.hi = mul(m, a, b);
    float e = madd(m, sa.hi, sb.hi, -r.hi);
    e = madd(m, sa.hi, sb.lo, e);
    e = madd(m, sa.lo, sb.hi, e);
    r.lo = madd(m, sa.lo, sb.lo, e);
    return r;
}

/* (a.hi + a.lo) b */
static dw prod_dw(const mode *m, dw a, float b)
{
    dw c = prod(m, a.hi, b);
    dw t = qsum(m, c.hi, mul(m, a.lo, b));
    return qsum(m, t.hi, add(m, t.lo, c.lo));
}

/* a + b for |a.hi| >= |b.hi| */
static dw qsum_dw(const mode *m, dw a, dw b)
{
    dw r = qsum(m, a.hi, b.hi);
    return qsum(m, r.hi, add(m, add(m, b.lo, r.lo), a.lo));
}

/* a + b in either order of magnitude: the fast sum in the order of the larger |hi|, both
 * computed and one chosen (as the vector code's select). */
static dw sum_dw(const mode *m, dw a, dw b)
{
    int a_big = fabsf(b.hi) < fabsf(a.hi);
    dw r1 = qsum(m, a.hi, b.hi), r2 = qsum(m, b.hi, a.hi);
    float s1 = add(m, add(m, b.lo, r1.lo), a.lo);
    float s2 = add(m, add(m, a.lo, r2.lo), b.lo);
    return qsum(m, a_big ? r1.hi : r2.hi, a_big ? s1 : s2);
}

/* ---- the kernel ------------------------------------------------------------------------ */

/* trunc(a + copysign(0.49999997, a)) */
static float round_away(const mode *m, float a)
{
    return truncf(add(m, of_bits((bits_of(a) & 0x80000000u) | bits_of(ROUND_HALF)), a));
}

/* log2(z), z in [1/sqrt2, sqrt2), as a double word */
static dw log2_mant(const mode *m, float z)
{
    float t = sub(m, z, 1.0f), t2 = mul(m, t, t);
    float ev = madd(m, LQ[6], t2, LQ[4]);
    ev = madd(m, ev, t2, LQ[2]);
    ev = madd(m, ev, t2, LQ[0]);
    float od = madd(m, LQ[5], t2, LQ[3]);
    od = madd(m, od, t2, LQ[1]);
    float p = madd(m, od, t, ev);
    dw q = prod(m, p, t);
    for (int k = 3; k >= 0; k--) {
        dw c = { LC_HI[k], LC_LO[k] };
        q = qsum_dw(m, c, q);
        q = prod_dw(m, q, t);
    }
    return q;
}

/* 2^r, r in [-1/2, 1/2] */
static float exp2_frac(const mode *m, float r)
{
    float r2 = mul(m, r, r);
    float ev = madd(m, EQ[4], r2, EQ[2]);
    float od = madd(m, EQ[3], r2, EQ[1]);
    ev = madd(m, ev, r2, EQ[0]);
    float p = madd(m, od, r, ev);
    dw c = { EC_HI, EC_LO };
    dw q = sum_dw(m, prod(m, p, r), c);
    q = prod_dw(m, q, r);
    dw s = qsum(m, 1.0f, q.hi);
    return add(m, s.hi, add(m, q.lo, s.lo));
}

/* a 2^n, n integral (float), in four factors 2^b 2^b 2^b 2^(e - 3b), e = n clamped to
 * [-278, 278], b = floor(e / 4). */
static float scale(const mode *m, float a, float n)
{
    float c = -278.0f > n ? -278.0f : n; /* max(-278, n): a NaN n passes (its lane is replaced) */
    c = 278.0f < c ? 278.0f : c;
    int32_t e = (c != c) ? INT32_MIN : (int32_t)c; /* cvttps: NaN -> 0x80000000 */
    int32_t b = e >> 2;                         /* arithmetic shift: floor */
    float f = of_bits((uint32_t)(b + 127) << 23);
    float out = mul(m, mul(m, mul(m, a, f), f), f);
    f = of_bits((uint32_t)(e - 3 * b + 127) << 23);
    return mul(m, out, f);
}

/* |x|^y for x = |x| (zero, inf and NaN give values the caller replaces) */
static float pow_abs(const mode *m, float x, float y)
{
    /* frexp: mantissa in [1/2, 1) with x's sign bit, exponent as a float */
    float mx = x, ex = 0.0f, off = -126.0f;
    uint32_t u = bits_of(x);
    if (fabsf(x) < 0x1p-126f) { /* subnormal (or zero): scaled by 2^24 first */
        u = bits_of(mul(m, x, 0x1p24f));
        off -= 24.0f;
    }
    float be = (float)(int32_t)((u & 0x7fffffffu) >> 23);
    if (!(x == 0.0f || be == 255.0f)) {
        mx = of_bits((u & 0x807fffffu) | bits_of(0.5f));
        ex = add(m, be, off);
    }
    if (mx < SQRT_HALF) {
        mx = mul(m, 2.0f, mx);
        ex = sub(m, ex, 1.0f);
    }
    dw lg = log2_mant(m, mx);
    dw f = qsum_dw(m, prod(m, ex, y), prod_dw(m, lg, y));
    float n = round_away(m, f.hi);
    float r = add(m, sub(m, f.hi, n), f.lo);
    float nr = round_away(m, r);
    r = sub(m, r, nr);
    n = add(m, n, nr);
    return scale(m, exp2_frac(m, r), n);
}

static float neg(float v) { return of_bits(bits_of(v) ^ 0x80000000u); }

float sinpe_eigen219_powf(float x, float y, int ftz)
{
    mode md = { ftz }, *m = &md;
    const float inf = INFINITY;
    float x_in = x; /* y = 1 blends x in: no arithmetic */
    x = fl(m, x);   /* DAZ: a subnormal operand reads as a zero of its sign */
    y = fl(m, y);
    float ax = fabsf(x), ay = fabsf(y);

    int ax_zero = ax == 0.0f, x_sign = bits_of(x) >> 31;
    int x_neg = x_sign && !ax_zero, x_neg_zero = x_sign && ax_zero;
    int ax_inf = ax == inf, ax_one = ax == 1.0f;
    int ax_gt1 = 1.0f < ax, ax_lt1 = ax < 1.0f;
    int x_one = ax_one && !x_neg, x_neg_one = ax_one && x_neg;
    int x_nan = x != x;

    int y_one = y == 1.0f, ay_zero = ay == 0.0f, y_neg = y < 0.0f;
    int y_pos = !(ay_zero || y_neg), y_nan = y != y, ay_inf = ay == inf;
    int ay_huge = HUGE_Y <= ay;
    int y_int = floorf(y) == y;
    float y_half = mul(m, y, 0.5f);
    int y_even = round_away(m, y_half) == y_half;

    int bad_neg = x_neg && !ax_inf && !y_int && !ay_inf;
    int is_nan = bad_neg || x_nan || y_nan;
    int is_one = x_one || ay_zero || (x_neg_one && (ay_inf || (y_even && !bad_neg)));
    int is_zero = (ax_zero && y_pos) || (ax_inf && y_neg) || (ax_lt1 && ay_huge && y_pos) ||
                  (ax_gt1 && ay_huge && y_neg);
    int is_inf = (ax_zero && y_neg) || (ax_inf && y_pos) || (ax_lt1 && ay_huge && y_neg) ||
                 (ax_gt1 && ay_huge && y_pos);
    int is_neg_zero = y_int && !y_even &&
                      ((y_neg && ax_inf && x_neg) || (y_pos && x_neg_zero));
    float inf_val = ((ax_inf && x_neg) || (x_neg_zero && y_neg)) && y_int && !y_even ? -inf : inf;
    int negate = x_neg && !y_even;

    float p = pow_abs(m, ax, y);
    if (y_one)
        return x_in;
    if (is_one)
        return 1.0f;
    if (is_nan)
        return of_bits(0x7fc00000u);
    if (is_inf)
        return inf_val;
    if (is_neg_zero)
        return -0.0f;
    if (is_zero)
        return 0.0f;
    return negate ? neg(p) : p;
}
