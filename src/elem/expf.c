/* sinpe_expf: correctly rounded float32 exp, for every float input.
 *
 * Method.  x = (64k + j) ln2/64 + r with k, j integers, 0 <= j < 64 and
 * |r| <= ln2/128, so exp(x) = 2^k * 2^(j/64) * exp(r).
 *  - Fast path, in double: r = x - n*ln2/64 with ln2/64 split into a 39-bit
 *    part (n*hi is exact, |n| < 2^14) and a rest; exp(r) - 1 by its Taylor
 *    polynomial of degree 6 (truncation < 2^-64 relative); the table value
 *    2^(j/64) rounded to double.  Relative error below 2^-50 (a few roundings
 *    of 2^-53); the result is accepted when both ends of y(1 +- 2^-47) round
 *    to the same float.
 *  - Slow path (taken for about 1 input in 2^20), in double-double: the same
 *    reduction with ln2/64 in three parts, exp(r) - 1 to degree 11 (truncation
 *    below 2^-118), 2^(j/64) as hi + lo; relative error about 2^-100, then one
 *    correct rounding from double-double to float (round to odd).
 * Range.  All floats.  exp(x) overflows to +inf for x > 0x1.62e43p+6 and
 * rounds to +0 for x < -0x1.9fe368p+6; subnormal results are rounded once,
 * from the double result, by the conversion to float.
 * Measured.  0 results differ from the correctly rounded value (MPFR) over
 * all 2^32 float inputs: `make -C tools exhaustive && tools/exhaustive exp`.
 */
#include "elem/crmath.h"
#include "elem/constants.h"
#include "elem/dd.h"

#ifdef SINPE_COUNT_SLOW
_Thread_local unsigned long long sinpe_exp_slow_count;
#endif

#define EXP_FAST_ERR 0x1p-47

/* 2^e as a double, for -1022 <= e <= 1023. */
static inline double exp2i(int e)
{
    return sinpe_asdouble((uint64_t)(e + 1023) << 52);
}

static float expf_slow(double xd, double n)
{
    const struct sinpe_consts *C = &SINPE_C;
    int64_t ni = (int64_t)n;
    int j = (int)(ni & 63);
    int k = (int)((ni - j) / 64);
    /* r = x - n*hi exactly, then subtract n*mid (error-free) and n*lo. */
    sinpe_dd r = dd_two_sum(xd - n * C->ln2_64_hi, -(n * C->ln2_64_mid));
    r.lo -= n * C->ln2_64_lo;
    r = dd_fast_two_sum(r.hi, r.lo);
    sinpe_dd p = dd_expm1_small(r, C->inv_fact); /* exp(r) - 1 */
    sinpe_dd t = { C->exp2_64[j][0], C->exp2_64[j][1] };
    sinpe_dd y = dd_add(t, dd_mul(t, p));
    /* -151 <= k <= 128: an exact scaling, nothing subnormal. */
    y.hi *= exp2i(k);
    y.lo *= exp2i(k);
    return dd_to_float(y);
}

float sinpe_expf(float x)
{
    const struct sinpe_consts *C = &SINPE_C;
    if (!(x <= 0x1.63p+6f)) /* NaN, +inf, or certain overflow */
        return x + 0x1p127f * 0x1p127f;
    if (x < -0x1.a0p+6f) /* -inf or certain underflow to +0 */
        return 0x1p-126f * 0x1p-126f;
    double xd = x;
    /* n = round(x * 64/ln2); |n| < 2^14. */
    double n = (xd * C->inv_ln2_64 + C->shift) - C->shift;
    double r = (xd - n * C->ln2_64_hi) - n * C->ln2_64_mid;
    double r2 = r * r;
    const double (*f)[2] = C->inv_fact;
    double p = r + r2 * (f[2][0] + r * f[3][0] + r2 * (f[4][0] + r * f[5][0] + r2 * f[6][0]));
    int64_t ni = (int64_t)n;
    int j = (int)(ni & 63);
    int k = (int)((ni - j) / 64);
    double t = C->exp2_64[j][0];
    double y = (t + t * p) * exp2i(k);
    float res;
    if (sinpe_round_is_safe(y, EXP_FAST_ERR, &res))
        return res;
    SINPE_COUNT(sinpe_exp_slow_count);
    return expf_slow(xd, n);
}
