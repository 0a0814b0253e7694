/* AVX2 + FMA path of the built-in sin/cos: 4 double lanes per vector.
 *
 * Method.  Per lane, as the scalar fast path but cheaper, because a lane
 * whose result is in doubt is recomputed by the scalar function (which is
 * correctly rounded), so this path only has to know when it is right:
 *  - Cody-Waite: k = round(x * 2/pi); y = (x - k h) - k l with pi/2 = h + l
 *    (double-double) by two fused multiply-adds: the first is exact (k*h is
 *    exact inside the fma, the difference fits 53 bits), the second rounds
 *    once; the dropped k*(pi/2 - h - l) is below 2^-86.  Lanes with
 *    |x| >= 2^20 go scalar (tested per row in tables: pos * max(div)).
 *  - sin y = y + y^3 P(y^2), cos y = 1 + y^2 Q(y^2) with P, Q Chebyshev
 *    fits of degree 4 (tools/gen_constants.py; relative error 2^-45.6 and
 *    2^-41.5 on |y| <= 0.7854), by Estrin's scheme.  With the roundings, the
 *    relative error of a lane's double result is below 2^-41.4, i.e. below
 *    2^11.6 ulps of that double.
 *  - Rounding test on the bits: the 29 bits a float drops are compared with
 *    the midpoint 2^28; within 2^13 ulps of it (probability 2^-15) the lane
 *    is recomputed by the scalar kernel, as are lanes with |x| < 2^-120
 *    (subnormal results), NaN and infinities.
 * Range: every float; the same bits as the scalar kernel (both correctly
 * rounded).  Measured: 0 differences from MPFR over all 2^32 inputs with
 * `tools/exhaustive sin --kernel avx2` (and cos); README.
 */
#include "sinpe_paths.h"

#ifdef SINPE_HAVE_AVX2_PATH
#include <immintrin.h>

#include <math.h>

#include "sinpe_constants.h"
#include "sinpe_cpu.h"
#include "sinpe_kernels.h"

#define TARGET __attribute__((target("avx2,fma")))

/* Rounding test of sin and cos at once: the low 32 bits of each double hold
 * the 29 bits a float drops; both results' words go into one vector of 8
 * int32 and are compared with the midpoint 2^28.  Returns, per 32-bit half,
 * all ones when that result lies within 2^13 ulps of a midpoint. */
TARGET static inline __m256i near_midpoint2(__m256d sv, __m256d cv)
{
    __m256i both = _mm256_blend_epi32(_mm256_castpd_si256(sv),
                                      _mm256_slli_epi64(_mm256_castpd_si256(cv), 32), 0xAA);
    /* t = low29 - (2^28 - 2^13), and near iff t <= 2^14 as unsigned */
    __m256i t = _mm256_sub_epi32(_mm256_and_si256(both, _mm256_set1_epi32((1 << 29) - 1)),
                                 _mm256_set1_epi32((1 << 28) - (1 << 13)));
    return _mm256_cmpeq_epi32(_mm256_min_epu32(t, _mm256_set1_epi32(2 << 13)), t);
}

/* sin and cos of 4 floats; returns a 4-bit mask of the lanes to redo.
 * checked = 0 skips the range test, for callers that know every lane has
 * 2^-120 <= |x| < 2^20. */
TARGET static inline int sincos4(__m128 xf, __m128 *sf, __m128 *cf, int checked)
{
    const struct sinpe_consts *C = &SINPE_C;
    const __m256d shifter = _mm256_set1_pd(C->shift);
    __m256d x = _mm256_cvtps_pd(xf);
    /* k = round(x 2/pi), of either sign; the low bits of kt are k mod 2^51
     * in two's complement, so they give k mod 4 for negative k too. */
    __m256d kt = _mm256_fmadd_pd(x, _mm256_set1_pd(C->two_over_pi), shifter);
    __m256d k = _mm256_sub_pd(kt, shifter);
    /* x - k*pio2_hi is exact (k*pio2_hi is exact inside the fma and the
     * difference fits 53 bits); the second step rounds once. */
    __m256d y = _mm256_fnmadd_pd(k, _mm256_set1_pd(C->pio2_hi), x);
    y = _mm256_fnmadd_pd(k, _mm256_set1_pd(C->pio2_lo), y);
    /* Estrin's scheme (short dependency chains) on the Chebyshev P, Q */
    __m256d z = _mm256_mul_pd(y, y);
    __m256d z2 = _mm256_mul_pd(z, z);
    __m256d z4 = _mm256_mul_pd(z2, z2);
    const double *p = C->sin_p, *q = C->cos_q;
#define B(v) _mm256_set1_pd(v)
    __m256d ps = _mm256_fmadd_pd(z2, _mm256_fmadd_pd(z, B(p[1]), B(p[2])),
                                 _mm256_fmadd_pd(z, B(p[3]), B(p[4])));
    ps = _mm256_fmadd_pd(z4, B(p[0]), ps);
    __m256d s = _mm256_fmadd_pd(_mm256_mul_pd(y, z), ps, y);
    __m256d pc = _mm256_fmadd_pd(z2, _mm256_fmadd_pd(z, B(q[1]), B(q[2])),
                                 _mm256_fmadd_pd(z, B(q[3]), B(q[4])));
    pc = _mm256_fmadd_pd(z4, B(q[0]), pc);
    __m256d c = _mm256_fmadd_pd(z, pc, B(1.0));
#undef B
    /* quadrant q = k mod 4: sin = [S, C, -S, -C][q], cos = [C, -S, -C, S][q]:
     * swap on bit 0, sin's sign is bit 1, cos's sign is bit 1 xor bit 0 */
    __m256i kb = _mm256_castpd_si256(kt);
    __m256i b0 = _mm256_slli_epi64(kb, 63), b10 = _mm256_slli_epi64(kb, 62);
    const __m256i sign = _mm256_set1_epi64x((long long)(1ULL << 63));
    __m256d swap = _mm256_castsi256_pd(b0);
    __m256d sv = _mm256_blendv_pd(s, c, swap);
    __m256d cv = _mm256_blendv_pd(c, s, swap);
    sv = _mm256_xor_pd(sv, _mm256_castsi256_pd(_mm256_and_si256(b10, sign)));
    cv = _mm256_xor_pd(cv, _mm256_castsi256_pd(_mm256_and_si256(_mm256_xor_si256(b10, b0), sign)));
    __m256d bad = _mm256_castsi256_pd(near_midpoint2(sv, cv));
    if (checked) {
        __m256d ax = _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(ax, _mm256_set1_pd(0x1p20), _CMP_NLT_UQ));
        bad = _mm256_or_pd(bad, _mm256_cmp_pd(ax, _mm256_set1_pd(0x1p-120), _CMP_LT_OQ));
    }
    *sf = _mm256_cvtpd_ps(sv);
    *cf = _mm256_cvtpd_ps(cv);
    int m8 = _mm256_movemask_ps(_mm256_castpd_ps(bad)); /* one bit per 32-bit half */
    if (!m8)
        return 0;
    int m = m8 | (m8 >> 1);
    return (m & 1) | ((m >> 1) & 2) | ((m >> 2) & 4) | ((m >> 3) & 8);
}

/* Interleaved store of 4 sin/cos pairs; lanes in mask redone by the scalar
 * kernel. */
TARGET static inline void store4(float *dst, __m128 a, __m128 s, __m128 c, int mask)
{
    _mm_storeu_ps(dst, _mm_unpacklo_ps(s, c));
    _mm_storeu_ps(dst + 4, _mm_unpackhi_ps(s, c));
    if (mask) {
        float av[4];
        _mm_storeu_ps(av, a);
        for (int l = 0; l < 4; l++)
            if ((mask >> l) & 1)
                sinpe_sincosf(av[l], &dst[2 * l], &dst[2 * l + 1]);
    }
}

TARGET static void avx2_rows(float *out, ptrdiff_t ostride, const float *positions,
                             int64_t first_row, int64_t nrows, const float *div, int64_t half,
                             float dmin, float dmax)
{
    for (int64_t r = 0; r < nrows; r++) {
        float pos = positions ? positions[r] : (float)(first_row + r);
        int checked = sinpe_row_needs_range_test(pos, dmin, dmax);
        __m128 vp = _mm_set1_ps(pos);
        float *dst = out + (ptrdiff_t)r * ostride;
        int64_t j = 0;
        for (; j + 8 <= half; j += 8) {
            __m128 a0 = _mm_mul_ps(vp, _mm_loadu_ps(div + j));
            __m128 a1 = _mm_mul_ps(vp, _mm_loadu_ps(div + j + 4));
            __m128 s0, c0, s1, c1;
            int m0 = sincos4(a0, &s0, &c0, checked);
            int m1 = sincos4(a1, &s1, &c1, checked);
            store4(dst + 2 * j, a0, s0, c0, m0);
            store4(dst + 2 * j + 8, a1, s1, c1, m1);
        }
        for (; j + 4 <= half; j += 4) {
            __m128 a0 = _mm_mul_ps(vp, _mm_loadu_ps(div + j));
            __m128 s0, c0;
            int m0 = sincos4(a0, &s0, &c0, checked);
            store4(dst + 2 * j, a0, s0, c0, m0);
        }
        for (; j < half; j++)
            sinpe_sincosf(pos * div[j], &dst[2 * j], &dst[2 * j + 1]);
    }
}

/* dst[2i] = s[i], dst[2i+1] = c[i] (the oneMKL path's store). */
TARGET static void avx2_interleave(const float *s, const float *c, float *dst, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 sv = _mm256_loadu_ps(s + i), cv = _mm256_loadu_ps(c + i);
        __m256 lo = _mm256_unpacklo_ps(sv, cv), hi = _mm256_unpackhi_ps(sv, cv);
        _mm256_storeu_ps(dst + 2 * i, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(dst + 2 * i + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
    }
    for (; i < n; i++) {
        dst[2 * i] = s[i];
        dst[2 * i + 1] = c[i];
    }
}

/* x[j] += pe[j] for j < n (add_pe's inner loop; IEEE float adds, the same
 * bits as the scalar loop). */
/* x[j] += pe[j]: the first values one by one until x is 32-byte aligned (the PE
 * scratch shares x's offset, so both are then aligned), then by vectors. */
TARGET static void avx2_add(float *x, const float *pe, size_t n)
{
    size_t j = 0;
    for (; j < n && ((uintptr_t)(x + j) & 31) != 0; j++)
        x[j] += pe[j];
    for (; j + 16 <= n; j += 16) {
        __m256 a = _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(pe + j));
        __m256 b = _mm256_add_ps(_mm256_loadu_ps(x + j + 8), _mm256_loadu_ps(pe + j + 8));
        _mm256_storeu_ps(x + j, a);
        _mm256_storeu_ps(x + j + 8, b);
    }
    for (; j < n; j++)
        x[j] += pe[j];
}

/* Elementwise sin/cos of n floats (for tests and tools). */
TARGET static void avx2_sincos(const float *a, float *s, float *c, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 x = _mm_loadu_ps(a + i), sv, cv;
        int m = sincos4(x, &sv, &cv, 1);
        _mm_storeu_ps(s + i, sv);
        _mm_storeu_ps(c + i, cv);
        for (int l = 0; l < 4; l++)
            if ((m >> l) & 1)
                sinpe_sincosf(a[i + l], &s[i + l], &c[i + l]);
    }
    for (; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}

const sinpe_path_ops sinpe_path_avx2 = {
    "avx2", sinpe_cpu_has_avx2_fma, avx2_rows, avx2_sincos, avx2_interleave, avx2_add,
};
#endif
