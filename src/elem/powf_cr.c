/* sinpe_powf_cr: correctly rounded float32 pow (the built-in backend's presets).
 *
 * Method.  |x|^y = exp(y ln|x|), all in double-double (sinpe_dd.h):
 *  - ln|x|: |x| = m 2^e with sqrt(1/2) <= m < sqrt(2); ln m = 2 atanh(u) with
 *    u = (m - 1)/(m + 1), |u| <= 0.1716, by its series to u^45 (truncation below
 *    2^-112 relative), plus e ln2 with ln2 as hi + lo: relative error about 2^-104.
 *  - t = y ln|x|; |t| <= 104 where the result is neither 0 nor inf, so t's absolute error
 *    is below 2^-97.
 *  - exp(t) as sinpe_expf's slow path: t = (64k + j) ln2/64 + r, |r| <= ln2/128, ln2/64 in
 *    three parts, exp(r) - 1 to degree 11, 2^(j/64) as hi + lo.
 *  Relative error of the double-double result: about 2^-96.
 * Rounding.  Round to odd, then to float (dd_to_float: correct whenever the exact value is
 * not within the error of a midpoint).  Exact midpoints exist (11^7, 66049^1.5 = 257^3):
 * a result within 2^-90 of a midpoint between two floats is taken to be that midpoint
 * and rounded to even.  (A non-exact x^y that close to a midpoint would be misrounded;
 * none is known, and none occurs among the presets' inputs.)
 * Range.  x finite and nonzero, y finite and nonzero, x > 0 or y an integer; all other
 * inputs (zeros, infinities, NaN, x < 0 with y not an integer, y = 0, x = 1) take C99's
 * special values from sinpe_powf_glibc, whose special cases are exact.
 * Measured.  0 differences from MPFR's mpfr_pow over the presets' exponent grids and 10^7
 * random pairs: `make -C tools powcheck && tools/powcheck` (docs/presets.md).
 */
#include "elem/crmath.h"
#include "elem/powf.h"

#include <math.h>

#include "elem/constants.h"
#include "elem/dd.h"

#define POW_TIE_ERR 0x1p-90
#define LN_TERMS 22 /* 1/(2k+1) for k = 0 .. LN_TERMS */

static sinpe_dd dd_mul_d(sinpe_dd a, double b)
{
    sinpe_dd p = dd_two_prod(a.hi, b);
    p.lo += a.lo * b;
    return dd_fast_two_sum(p.hi, p.lo);
}

/* ln(ax) for a finite ax > 0 (a float's value). */
static sinpe_dd dd_log(double ax)
{
    const struct sinpe_consts *C = &SINPE_C;
    int e;
    double m = frexp(ax, &e); /* exact: 0.5 <= m < 1 */
    if (m < 0x1.6a09e667f3bcdp-1) { /* sqrt(1/2) */
        m *= 2.0;
        e -= 1;
    }
    double num = m - 1.0, den = m + 1.0; /* both exact: m has 24 bits */
    double q = num / den;
    sinpe_dd u = { q, fma(-q, den, num) / den };
    u = dd_fast_two_sum(u.hi, u.lo);
    sinpe_dd u2 = dd_mul(u, u);
    sinpe_dd s = { C->inv_odd[LN_TERMS][0], C->inv_odd[LN_TERMS][1] };
    for (int k = LN_TERMS - 1; k >= 0; k--) {
        sinpe_dd c = { C->inv_odd[k][0], C->inv_odd[k][1] };
        s = dd_add(dd_mul(s, u2), c);
    }
    sinpe_dd lnm = dd_mul(u, s);
    lnm.hi *= 2.0;
    lnm.lo *= 2.0;
    sinpe_dd eln2 = dd_two_prod((double)e, C->ln2[0]);
    eln2.lo += (double)e * C->ln2[1];
    eln2 = dd_fast_two_sum(eln2.hi, eln2.lo);
    return dd_add(eln2, lnm);
}

/* exp(t) for -104 <= t.hi <= 89, as a double-double (not yet rounded). */
static sinpe_dd dd_exp(sinpe_dd t)
{
    const struct sinpe_consts *C = &SINPE_C;
    double n = (t.hi * C->inv_ln2_64 + C->shift) - C->shift;
    int64_t ni = (int64_t)n;
    int j = (int)(ni & 63);
    int k = (int)((ni - j) / 64);
    /* t.hi - n*hi is exact (n*hi has 53 bits; Sterbenz) */
    sinpe_dd r = dd_two_sum(t.hi - n * C->ln2_64_hi, -(n * C->ln2_64_mid));
    r.lo += t.lo - n * C->ln2_64_lo;
    r = dd_fast_two_sum(r.hi, r.lo);
    sinpe_dd p = dd_expm1_small(r, C->inv_fact); /* exp(r) - 1 */
    sinpe_dd tj = { C->exp2_64[j][0], C->exp2_64[j][1] };
    sinpe_dd y = dd_add(tj, dd_mul(tj, p));
    double s = sinpe_asdouble((uint64_t)(k + 1023) << 52); /* -151 <= k <= 128 */
    y.hi *= s;
    y.lo *= s;
    return y;
}

/* The float nearest y, ties (within POW_TIE_ERR) to even. */
static float round_dd(sinpe_dd y)
{
    float f = (float)y.hi;
    if (isfinite(f) && (double)f != y.hi) {
        float g = nextafterf(f, y.hi > (double)f ? INFINITY : -INFINITY);
        double mid = ((double)f + (double)g) * 0.5; /* exact */
        if (isfinite(g) && fabs((y.hi - mid) + y.lo) <= POW_TIE_ERR * fabs(mid))
            return (float)mid; /* ties to even */
    }
    return dd_to_float(y);
}

/* 0: y not an integer, 1: odd, 2: even (y finite). */
static int int_kind(float y)
{
    if (truncf(y) != y)
        return 0;
    if (fabsf(y) >= 0x1p24f)
        return 2;
    return ((int32_t)y & 1) ? 1 : 2;
}

float sinpe_powf_cr(float x, float y)
{
    int yk = isfinite(y) ? int_kind(y) : 0;
    if (!isfinite(x) || x == 0.0f || !isfinite(y) || y == 0.0f || x == 1.0f
        || (x < 0.0f && yk == 0))
        return sinpe_powf_glibc(x, y, 0);
    sinpe_dd t = dd_mul_d(dd_log(fabs((double)x)), (double)y);
    float r;
    if (t.hi > 89.0)
        r = INFINITY;
    else if (t.hi < -104.0)
        r = 0.0f;
    else
        r = round_dd(dd_exp(t));
    return x < 0.0f && yk == 1 ? -r : r;
}
