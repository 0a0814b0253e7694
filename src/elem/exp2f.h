/* glibc's float exp2 step, shared by its expf and powf (and so by elem/glibcf.c and
 * elem/powf.c), written once: its 32-entry table, whose entry i holds the bits of 2^(i/32)
 * as a double with i/32 shifted out of its exponent field (entry i minus (i << 47)), so that
 * adding k << 47 to the bits of entry k % 32 gives 2^(k/32) (the exponent added to the
 * bits), as an initializer for each file's constants struct; the multiply-add both files'
 * kernels write (madd: fused as glibc's FMA build, or as written); and the step that ends
 * both, 2^(k/32) times the degree-3 polynomial of the remainder. */
#ifndef SINPE_ELEM_EXP2F_H
#define SINPE_ELEM_EXP2F_H

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"

#define SINPE_EXP2F_TABLE                                                                        \
    { 0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,            \
      0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,            \
      0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,            \
      0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,            \
      0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,            \
      0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,            \
      0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,            \
      0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540 }

/* a * b + c, fused (one rounding: glibc's FMA build, where GCC contracts the source's
 * a * b + c) or as written (two). */
static inline double sinpe_madd(double a, double b, double c, int fused)
{
    return fused ? fma(a, b, c) : a * b + c;
}

/* 2^(k/32) * (1 + c[2] r + c[1] r^2 + c[0] r^3) rounded once to float, with the scale from
 * tab's entry ki % 32 and (ki + sign_bias) << 47 added to its bits (sign_bias: powf's sign
 * of the result, 0 for expf), the polynomial in glibc's order. */
static inline float sinpe_exp2f_scaled(const uint64_t tab[32], const double c[3], uint64_t ki,
                                       uint64_t sign_bias, double r, int fused)
{
    uint64_t t = tab[ki % 32];
    t += (ki + sign_bias) << (52 - 5);
    double s = sinpe_asdouble(t);
    double z = sinpe_madd(c[0], r, c[1], fused);
    double r2 = r * r;
    double y = sinpe_madd(c[2], r, 1.0, fused);
    y = sinpe_madd(z, r2, y, fused);
    return (float)(y * s);
}

#endif
