/* sinpe_sinf, sinpe_cosf, sinpe_sincosf: correctly rounded float32 sin and
 * cos, for every float input.
 *
 * Method.  |x| = q*pi/2 + y with |y| <= pi/4 (a hair more after Cody-Waite),
 * then sin/cos of y by the quadrant q mod 4.
 *  - Reduction, fast path: |x| < pi/4 needs none; |x| < 2^20 uses Cody-Waite
 *    with pi/2 in three parts (the first two of 33 bits, so k*p1 and k*p2 are
 *    exact for k < 2^20), giving y as a double-double with absolute error
 *    about 2^-98; larger |x| uses the Payne-Hanek reduction below.
 *  - Reduction, Payne-Hanek (integer): |x| = M*2^(E-150) with a 24-bit M;
 *    M times 192 bits of 2/pi taken from bit E-152 on gives x*2/pi mod 4 as
 *    a 192-bit fixed-point number (2 integer bits, 190 fraction bits, error
 *    < 2^-166); the fraction, negated past 1/2, times pi/2 in double-double is
 *    y with a relative error of about 2^-100.
 *  - Fast path: Taylor polynomials in double, degree 17 for sin and 16 for
 *    cos (truncation < 2^-54 relative on |y| <= 0.786), plus the first-order
 *    term of y.lo; relative error below 2^-50.  Accepted when both ends of
 *    r(1 +- 2^-47) round to the same float.
 *  - Slow path (about 1 input in 2^21): Payne-Hanek reduction, Taylor
 *    polynomials in double-double to degree 27 / 28 (truncation < 2^-112),
 *    one correct rounding from double-double to float.
 * Range.  All floats; sin(+-0) = +-0, sin/cos of +-inf and NaN are NaN.
 * Measured.  0 results differ from the correctly rounded value (MPFR) over
 * all 2^32 float inputs: `make -C tools exhaustive && tools/exhaustive sin`
 * (and `cos`).
 */
#include "elem/crmath.h"
#include "elem/constants.h"
#include "elem/dd.h"

#ifdef SINPE_COUNT_SLOW
_Thread_local unsigned long long sinpe_sincos_slow_count;
#endif

#define SINCOS_FAST_ERR 0x1p-47
#define PIO4_BELOW 0x1.921fb4p-1f /* a float below pi/4 */

/* Bits p+1 .. p+32 of 2/pi after the binary point; bits at index <= 0 are 0. */
static uint32_t two_over_pi_bits(int p)
{
    if (p <= -32)
        return 0;
    if (p < 0)
        return SINPE_TWO_OVER_PI[0] >> (-p);
    int w = p / 32, sh = p % 32;
    uint64_t v = ((uint64_t)SINPE_TWO_OVER_PI[w] << 32) | SINPE_TWO_OVER_PI[w + 1];
    return (uint32_t)(v >> (32 - sh));
}

/* Payne-Hanek reduction of a finite ax >= 2^-24 (as float bits).  Returns q
 * mod 4 and stores y (double-double, |y| <= pi/4) with ax = q*pi/2 + y. */
static unsigned reduce_payne_hanek(float ax, sinpe_dd *y)
{
    uint32_t u = sinpe_f32_bits(ax);
    int e = (int)(u >> 23);
    uint64_t m = (u & 0x7fffffu) | 0x800000u;
    int s = e - 152;
    uint32_t r[6];
    uint64_t carry = 0;
    for (int i = 5; i >= 0; i--) {
        uint64_t t = m * two_over_pi_bits(s + 32 * i) + carry;
        r[i] = (uint32_t)t;
        carry = t >> 32;
    }
    /* r = x*2/pi mod 4 in units of 2^-190: 2 integer bits on top. */
    unsigned q = r[0] >> 30;
    r[0] &= 0x3fffffffu;
    int neg = (r[0] >> 29) & 1; /* fraction >= 1/2: take q+1 and f - 1 */
    if (neg) {
        q += 1;
        /* magnitude 2^190 - f: two's complement over the 190 bits */
        uint64_t borrow = 1;
        for (int i = 5; i >= 0; i--) {
            uint64_t t = (uint64_t)(uint32_t)~r[i] + borrow;
            r[i] = (uint32_t)t;
            borrow = t >> 32;
        }
        r[0] &= 0x3fffffffu;
    }
    sinpe_dd f = { 0.0, 0.0 };
    double scale = 0x1p-190;
    for (int i = 5; i >= 0; i--) { /* least significant first: exact partial sums */
        sinpe_dd t = { (double)r[i] * scale, 0.0 };
        f = dd_add(f, t);
        scale *= 0x1p32;
    }
    sinpe_dd pio2 = { SINPE_C.pio2_hi, SINPE_C.pio2_lo };
    *y = dd_mul(f, pio2);
    if (neg) {
        y->hi = -y->hi;
        y->lo = -y->lo;
    }
    return q & 3;
}

/* Fast reduction of a finite ax (see the header comment). */
static unsigned reduce_fast(float ax, sinpe_dd *y)
{
    const struct sinpe_consts *C = &SINPE_C;
    if (ax < PIO4_BELOW) {
        y->hi = ax;
        y->lo = 0.0;
        return 0;
    }
    if (ax < 0x1p20f) {
        double xd = ax;
        double k = (xd * C->two_over_pi + C->shift) - C->shift;
        *y = dd_two_sum(xd - k * C->pio2_1, -(k * C->pio2_2));
        y->lo -= k * C->pio2_3;
        *y = dd_fast_two_sum(y->hi, y->lo);
        return (unsigned)(int64_t)k & 3;
    }
    return reduce_payne_hanek(ax, y);
}

static void sincos_poly_fast(sinpe_dd y, double *s, double *c)
{
    const double (*f)[2] = SINPE_C.inv_fact;
    double z = y.hi * y.hi;
    double ps = -f[3][0] + z * (f[5][0] + z * (-f[7][0] + z * (f[9][0] + z * (-f[11][0]
                + z * (f[13][0] + z * (-f[15][0] + z * f[17][0]))))));
    double pc = -f[2][0] + z * (f[4][0] + z * (-f[6][0] + z * (f[8][0] + z * (-f[10][0]
                + z * (f[12][0] + z * (-f[14][0] + z * f[16][0]))))));
    double s0 = y.hi + y.hi * z * ps;
    double c0 = 1.0 + z * pc;
    *s = s0 + y.lo * c0;
    *c = c0 - y.lo * s0;
}

static sinpe_dd dd_neg(sinpe_dd a)
{
    sinpe_dd r = { -a.hi, -a.lo };
    return r;
}

/* sum_{i=0}^{n} (-1)^i z^i / (2i + first)!  by Horner in double-double. */
static sinpe_dd dd_alt_series(sinpe_dd z, int first, int n)
{
    const double (*f)[2] = SINPE_C.inv_fact;
    sinpe_dd p = { f[first + 2 * n][0], f[first + 2 * n][1] };
    if (n & 1)
        p = dd_neg(p);
    for (int i = n - 1; i >= 0; i--) {
        sinpe_dd c = { f[first + 2 * i][0], f[first + 2 * i][1] };
        if (i & 1)
            c = dd_neg(c);
        p = dd_add(dd_mul(p, z), c);
    }
    return p;
}

static void sincos_slow(float ax, int want_sin, int want_cos, double sign,
                        float *s, float *c)
{
    SINPE_COUNT(sinpe_sincos_slow_count);
    sinpe_dd y;
    unsigned q;
    if (ax < PIO4_BELOW) {
        y.hi = ax;
        y.lo = 0.0;
        q = 0;
    } else {
        q = reduce_payne_hanek(ax, &y);
    }
    sinpe_dd z = dd_mul(y, y);
    sinpe_dd sy = dd_mul(y, dd_alt_series(z, 1, 13)); /* degree 27 */
    sinpe_dd cy = dd_alt_series(z, 0, 14);              /* degree 28 */
    sinpe_dd sv = (q & 1) ? cy : sy, cv = (q & 1) ? sy : cy;
    if (q == 2 || q == 3) /* sin(x) = -sin(y) or -cos(y) */
        sv = dd_neg(sv);
    if (q == 1 || q == 2) /* cos(x) = -sin(y) or -cos(y) */
        cv = dd_neg(cv);
    if (want_sin)
        *s = dd_to_float(sv) * (float)sign;
    if (want_cos)
        *c = dd_to_float(cv);
}

/* Shared body: computes the requested ones of sin(x), cos(x). */
static void sincos_impl(float x, int want_sin, int want_cos, float *s, float *c)
{
    float ax = fabsf(x);
    if (!(ax < INFINITY)) { /* NaN or inf */
        *s = *c = x - x;
        return;
    }
    if (ax == 0.0f) {
        *s = x;
        *c = 1.0f;
        return;
    }
    double sign = x < 0 ? -1.0 : 1.0;
    sinpe_dd y;
    unsigned q = reduce_fast(ax, &y);
    double sy, cy;
    sincos_poly_fast(y, &sy, &cy);
    double sv = (q & 1) ? cy : sy, cv = (q & 1) ? sy : cy;
    if (q == 2 || q == 3)
        sv = -sv;
    if (q == 1 || q == 2)
        cv = -cv;
    int ok_s = !want_sin || sinpe_round_is_safe(sv * sign, SINCOS_FAST_ERR, s);
    int ok_c = !want_cos || sinpe_round_is_safe(cv, SINCOS_FAST_ERR, c);
    if (!(ok_s && ok_c))
        sincos_slow(ax, want_sin && !ok_s, want_cos && !ok_c, sign, s, c);
}

void sinpe_sincosf(float x, float *s, float *c)
{
    sincos_impl(x, 1, 1, s, c);
}

float sinpe_sinf(float x)
{
    float s, c;
    sincos_impl(x, 1, 0, &s, &c);
    return s;
}

float sinpe_cosf(float x)
{
    float s, c;
    sincos_impl(x, 0, 1, &s, &c);
    return c;
}
