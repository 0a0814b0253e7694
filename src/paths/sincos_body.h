/* The vector sin/cos of the built-in kernels, written once over double lanes and compiled
 * per instruction set (paths layer): paths/body.h includes it, after the path file has
 * defined its lane operations, as SLEEF and highway write one kernel over a small vector
 * abstraction.
 *
 * Method.  Per lane, as the scalar fast path but cheaper, because a lane whose result is in
 * doubt is recomputed by the scalar function (which is correctly rounded), so this kernel
 * only has to know when it is right:
 *  - Cody-Waite: k = round(x * 2/pi); y = (x - k h) - k l with pi/2 = h + l (double-double)
 *    by two fused multiply-adds: the first is exact (k*h is exact inside the fma, the
 *    difference fits 53 bits), the second rounds once; the dropped k*(pi/2 - h - l) is
 *    below 2^-86.  Lanes with |x| >= 2^20 go scalar (tested per row in tables:
 *    pos * max(div)).
 *  - sin y = y + y^3 P(y^2), cos y = 1 + y^2 Q(y^2) with P, Q Chebyshev fits of degree 4
 *    (tools/gen_constants.py; relative error 2^-45.6 and 2^-41.5 on |y| <= 0.7854), by
 *    Estrin's scheme.  With the roundings, the relative error of a lane's double result is
 *    below 2^-41.4, i.e. below 2^11.6 ulps of that double.
 *  - Rounding test on the bits: the 29 bits a float drops are compared with the midpoint
 *    2^28; within 2^13 ulps of it (probability 2^-15) the lane is recomputed by the scalar
 *    kernel, as are lanes with |x| < 2^-120 (subnormal results), NaN and infinities.
 * Range: every float; the same bits as the scalar kernel (both correctly rounded).  Every
 * step is one IEEE double operation (the core is compiled with -ffp-contract=off; the
 * fused steps are the explicit PATH_DFMA / PATH_DFNMA), in this order on every path, so each
 * lane's double and the lanes redone are the same on every path.  Measured: 0 differences
 * from MPFR over all 2^32 inputs with `tools/exhaustive sin --kernel avx2` (and cos,
 * avx512); tools/crosscheck under qemu-aarch64 for neon: the paths' records.
 *
 * The path file defines, besides body.h's macros:
 *   PATH_DW                  double lanes per vector; PATH_W is PATH_DW or 2 * PATH_DW
 *   PATH_VD, PATH_VI, PATH_VM  a vector of PATH_DW doubles, of as many 64-bit integers, a
 *                            mask of as many lanes
 *   PATH_DSET1(x), PATH_DSUB(a, b), PATH_DMUL(a, b)
 *   PATH_DFMA(a, b, c)       a * b + c, rounded once;  PATH_DFNMA(a, b, c): c - a * b, once
 *   PATH_DABS(a)             |a| (bits)
 *   PATH_DNLT(a, b), PATH_DLT(a, b)  masks of !(a < b) (true when unordered) and a < b
 *   PATH_DBITS(a)            a's bits as PATH_VI
 *   PATH_ISET1(x), PATH_ISHL(a, n), PATH_IXOR(a, b)  64-bit lanes
 *   PATH_IODD(a)             mask of the lanes whose bit 0 is set
 *   PATH_DBLEND(m, a, b)     m ? b : a per lane
 *   PATH_DFLIP(v, i)         v with its sign flipped in the lanes where i's top bit is set
 *   PATH_MOR(a, b), PATH_MBITS(m)  masks' union; a mask as bits, lane l at bit l
 *   PATH_NEAR2(s, c)         optional: the mask of the lanes where s or c is within 2^13 of
 *                            a float midpoint; by default from PATH_IAND, PATH_ISUB and
 *                            PATH_ILEU(a, b) (unsigned a <= b) below
 *   PATH_F2D(v), PATH_D2F(d) (PATH_W == PATH_DW) the floats widened, the doubles rounded;
 *   PATH_F2D_LO(v), PATH_F2D_HI(v), PATH_D2F2(lo, hi)  (PATH_W == 2 * PATH_DW) by halves
 */

#include <stdint.h>

#include "elem/constants.h"

/* The kernel's own constants (the polynomials and pi/2 are elem/constants.h's SINPE_C). */
static const struct {
    double big, tiny;        /* lanes with |x| >= big or |x| < tiny (or NaN) go scalar */
    uint64_t drop;           /* the 29 bits a float drops of a double */
    uint64_t near_lo;        /* 2^28 - 2^13: a lane is near iff drop bits - near_lo <= */
    uint64_t near_width;     /* 2^14, as unsigned */
    uint64_t sign;           /* a double's sign bit */
} SINPE_SC = { 0x1p20, 0x1p-120, (1u << 29) - 1, (1u << 28) - (1u << 13), 2u << 13,
               1ull << 63 };

#ifndef PATH_NEAR2
/* Lanes whose double's 29 dropped bits lie within 2^13 of the midpoint 2^28:
 * t = low29 - (2^28 - 2^13), near iff t <= 2^14 as unsigned. */
PATH_TARGET static inline PATH_VM FN(near)(PATH_VD v)
{
    PATH_VI t = PATH_ISUB(PATH_IAND(PATH_DBITS(v), PATH_ISET1(SINPE_SC.drop)),
                          PATH_ISET1(SINPE_SC.near_lo));
    return PATH_ILEU(t, PATH_ISET1(SINPE_SC.near_width));
}
#define PATH_NEAR2(s, c) PATH_MOR(FN(near)(s), FN(near)(c))
#endif

/* sin and cos of PATH_DW doubles (float values); returns the mask of the lanes to redo.
 * checked = 0 skips the range test, for callers that know every lane has
 * 2^-120 <= |x| < 2^20. */
PATH_TARGET static inline PATH_VM FN(sincos_d)(PATH_VD x, PATH_VD *sv_out, PATH_VD *cv_out,
                                               int checked)
{
    const struct sinpe_consts *C = &SINPE_C;
    const PATH_VD shifter = PATH_DSET1(C->shift);
    /* k = round(x 2/pi), of either sign; the low bits of kt are k mod 2^51 in two's
     * complement, so they give k mod 4 for negative k too. */
    PATH_VD kt = PATH_DFMA(x, PATH_DSET1(C->two_over_pi), shifter);
    PATH_VD k = PATH_DSUB(kt, shifter);
    /* x - k*pio2_hi is exact (k*pio2_hi is exact inside the fma and the difference fits 53
     * bits); the second step rounds once. */
    PATH_VD y = PATH_DFNMA(k, PATH_DSET1(C->pio2_hi), x);
    y = PATH_DFNMA(k, PATH_DSET1(C->pio2_lo), y);
    /* Estrin's scheme (short dependency chains) on the Chebyshev P, Q */
    PATH_VD z = PATH_DMUL(y, y);
    PATH_VD z2 = PATH_DMUL(z, z);
    PATH_VD z4 = PATH_DMUL(z2, z2);
    const double *p = C->sin_p, *q = C->cos_q;
#define B(v) PATH_DSET1(v)
    PATH_VD ps = PATH_DFMA(z2, PATH_DFMA(z, B(p[1]), B(p[2])), PATH_DFMA(z, B(p[3]), B(p[4])));
    ps = PATH_DFMA(z4, B(p[0]), ps);
    PATH_VD s = PATH_DFMA(PATH_DMUL(y, z), ps, y);
    PATH_VD pc = PATH_DFMA(z2, PATH_DFMA(z, B(q[1]), B(q[2])), PATH_DFMA(z, B(q[3]), B(q[4])));
    pc = PATH_DFMA(z4, B(q[0]), pc);
    PATH_VD c = PATH_DFMA(z, pc, B(1.0));
#undef B
    /* quadrant q = k mod 4: sin = [S, C, -S, -C][q], cos = [C, -S, -C, S][q]: swap on bit 0,
     * sin's sign is bit 1, cos's sign is bit 1 xor bit 0 */
    PATH_VI kb = PATH_DBITS(kt);
    PATH_VI b10 = PATH_ISHL(kb, 62), b0 = PATH_ISHL(kb, 63);
    PATH_VM swap = PATH_IODD(kb);
    PATH_VD sv = PATH_DBLEND(swap, s, c);
    PATH_VD cv = PATH_DBLEND(swap, c, s);
    sv = PATH_DFLIP(sv, b10);
    cv = PATH_DFLIP(cv, PATH_IXOR(b10, b0));
    PATH_VM bad = PATH_NEAR2(sv, cv);
    if (checked) {
        PATH_VD ax = PATH_DABS(x);
        bad = PATH_MOR(bad, PATH_DNLT(ax, PATH_DSET1(SINPE_SC.big)));
        bad = PATH_MOR(bad, PATH_DLT(ax, PATH_DSET1(SINPE_SC.tiny)));
    }
    *sv_out = sv;
    *cv_out = cv;
    return bad;
}

/* sin and cos of PATH_W floats; returns the PATH_W-bit mask of the lanes to redo. */
PATH_TARGET static inline unsigned FN(sincos_f)(PATH_VF a, PATH_VF *sf, PATH_VF *cf,
                                                int checked)
{
#if PATH_W == PATH_DW
    PATH_VD s, c;
    PATH_VM m = FN(sincos_d)(PATH_F2D(a), &s, &c, checked);
    *sf = PATH_D2F(s);
    *cf = PATH_D2F(c);
    return PATH_MBITS(m);
#else
    PATH_VD s0, c0, s1, c1;
    PATH_VM m0 = FN(sincos_d)(PATH_F2D_LO(a), &s0, &c0, checked);
    PATH_VM m1 = FN(sincos_d)(PATH_F2D_HI(a), &s1, &c1, checked);
    *sf = PATH_D2F2(s0, s1);
    *cf = PATH_D2F2(c0, c1);
    return PATH_MBITS(m0) | (PATH_MBITS(m1) << PATH_DW);
#endif
}
#undef PATH_NEAR2
