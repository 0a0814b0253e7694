/* Double-double arithmetic for the slow (accurate) paths of the kernels.
 *
 * A value is hi + lo with |lo| <= ulp(hi)/2.  The error-free transformations
 * are the classic ones (Knuth's TwoSum, Dekker's Fast2Sum, TwoProd with an
 * explicit fused multiply-add); the library is compiled with
 * -ffp-contract=off, so every fma here is written out and no other is formed.
 */
#ifndef SINPE_DD_H
#define SINPE_DD_H

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"

typedef struct { double hi, lo; } sinpe_dd;

static inline sinpe_dd dd_two_sum(double a, double b)
{
    double s = a + b;
    double bb = s - a;
    sinpe_dd r = { s, (a - (s - bb)) + (b - bb) };
    return r;
}

/* Requires |a| >= |b| (or a == 0). */
static inline sinpe_dd dd_fast_two_sum(double a, double b)
{
    double s = a + b;
    sinpe_dd r = { s, b - (s - a) };
    return r;
}

static inline sinpe_dd dd_two_prod(double a, double b)
{
    double p = a * b;
    sinpe_dd r = { p, fma(a, b, -p) };
    return r;
}

static inline sinpe_dd dd_add(sinpe_dd a, sinpe_dd b)
{
    sinpe_dd s = dd_two_sum(a.hi, b.hi);
    sinpe_dd t = dd_two_sum(a.lo, b.lo);
    s.lo += t.hi;
    s = dd_fast_two_sum(s.hi, s.lo);
    s.lo += t.lo;
    return dd_fast_two_sum(s.hi, s.lo);
}

static inline sinpe_dd dd_mul(sinpe_dd a, sinpe_dd b)
{
    sinpe_dd p = dd_two_prod(a.hi, b.hi);
    p.lo += a.hi * b.lo + a.lo * b.hi;
    return dd_fast_two_sum(p.hi, p.lo);
}

/* Correct rounding of the double-double a (hi nonzero, |lo| <= ulp(hi)/2) to
 * float.  hi is first rounded to odd with the sticky information in lo; a
 * double holds 53 >= 24 + 2 bits, so one further rounding to float is then
 * correct (Boldo and Melquiond, "When double rounding is odd", 2005). */
static inline float dd_to_float(sinpe_dd a)
{
    uint64_t u = sinpe_asuint64(a.hi);
    if (a.lo != 0.0 && (u & 1u) == 0) {
        /* same sign: the exact value is larger in magnitude than hi */
        if ((a.lo > 0.0) == (a.hi > 0.0))
            u += 1;
        else
            u -= 1;
    }
    return (float)sinpe_asdouble(u);
}

/* Rounding test of the fast paths.  y approximates the exact value v with
 * |v - y| <= e|y|.  Stores (float)y in *out and returns 1 when both ends of
 * [y - e|y|, y + e|y|] round to the same float, which is then the correctly
 * rounded v; returns 0 when a rounding boundary may lie inside (the caller
 * then takes its slow path).  e must be well above 2^-53 so that rounding the
 * two ends to double cannot hide a boundary. */
static inline int sinpe_round_is_safe(double y, double e, float *out)
{
    double d = y * e;
    float a = (float)(y - d), b = (float)(y + d);
    *out = a;
    return a == b;
}

/* exp(r) - 1 = r(1 + r/2(1 + r/3 ...)) in double-double by Horner on 1/n!, n = 11 down to 1
 * (inv_fact[n] = 1/n! as hi, lo), for the small reduced arguments of sinpe_expf.c and
 * sinpe_powf_cr.c (|r| <= ln2/128 about). */
static inline sinpe_dd dd_expm1_small(sinpe_dd r, const double inv_fact[][2])
{
    sinpe_dd p = { inv_fact[11][0], inv_fact[11][1] };
    for (int i = 10; i >= 1; i--) {
        sinpe_dd c = { inv_fact[i][0], inv_fact[i][1] };
        p = dd_add(dd_mul(p, r), c);
    }
    return dd_mul(p, r);
}

#endif
