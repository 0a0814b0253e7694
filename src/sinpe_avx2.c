/* AVX2 + FMA path of the built-in sin/cos: 4 double lanes per vector.
 *
 * Method.  Per lane, as the scalar fast path but cheaper, because a lane
 * whose result is in doubt is recomputed by the scalar function (which is
 * correctly rounded), so this path only has to know when it is right:
 *  - Cody-Waite: k = round(x * 2/pi); y = ((x - k p1) - k p2) - k p3 by
 *    three fused multiply-adds (the first is exact: k*p1 has 53 bits and the
 *    difference fits a double); lanes with |x| >= 2^20 go scalar.
 *  - sin y: Taylor to degree 13, relative truncation < 2^-45 on |y| <= pi/4;
 *    cos y: Taylor to degree 14, < 2^-50.  With the roundings, the relative
 *    error of a lane's double result is below 2^-44.5, i.e. below 2^8.5 ulps
 *    of that double.
 *  - Rounding test on the bits: the 29 bits a float drops are compared with
 *    the midpoint 2^28; within 2^10 ulps of it (probability 2^-18) the lane
 *    is recomputed by the scalar kernel, as are lanes with |x| < 2^-120
 *    (subnormal results), NaN and infinities.
 * Range: every float; the same bits as the scalar kernel (both correctly
 * rounded).  Measured: 0 differences from MPFR over all 2^32 inputs with
 * `tools/exhaustive sin --kernel avx2` (and cos); README.
 */
#include "sinpe_cpu.h"

#ifdef SINPE_HAVE_AVX2_KERNEL
#include <immintrin.h>

#include "sinpe_constants.h"
#include "sinpe_kernels.h"

#define TARGET __attribute__((target("avx2,fma")))

/* Rounding test of sin and cos at once: the low 32 bits of each double hold
 * the 29 bits a float drops; both results' words go into one vector of 8
 * int32 and are compared with the midpoint 2^28.  Returns, per 64-bit lane,
 * nonzero when either result lies within 2^10 ulps of a midpoint. */
TARGET static inline __m256i near_midpoint2(__m256d sv, __m256d cv)
{
    __m256i both = _mm256_blend_epi32(_mm256_castpd_si256(sv),
                                      _mm256_slli_epi64(_mm256_castpd_si256(cv), 32), 0xAA);
    /* t = low29 - (2^28 - 2^10), and near iff t < 2^11 + 1 as unsigned */
    __m256i t = _mm256_sub_epi32(_mm256_and_si256(both, _mm256_set1_epi32((1 << 29) - 1)),
                                 _mm256_set1_epi32((1 << 28) - (1 << 10)));
    return _mm256_cmpeq_epi32(_mm256_min_epu32(t, _mm256_set1_epi32(2 << 10)), t);
}

/* sin and cos of 4 floats; returns a 4-bit mask of the lanes to redo. */
TARGET static inline int sincos4(__m128 xf, __m128 *sf, __m128 *cf)
{
    const struct sinpe_consts *C = &SINPE_C;
    const double (*f)[2] = C->inv_fact;
    const __m256d signbit = _mm256_set1_pd(-0.0);
    const __m256d shifter = _mm256_set1_pd(C->shift);
    __m256d x = _mm256_cvtps_pd(xf);
    /* k = round(x 2/pi), of either sign; the low bits of kt are k mod 2^51
     * in two's complement, so kt & 3 is k mod 4 for negative k too. */
    __m256d kt = _mm256_fmadd_pd(x, _mm256_set1_pd(C->two_over_pi), shifter);
    __m256d k = _mm256_sub_pd(kt, shifter);
    __m256d y = _mm256_fnmadd_pd(k, _mm256_set1_pd(C->pio2_1), x);
    y = _mm256_fnmadd_pd(k, _mm256_set1_pd(C->pio2_2), y);
    y = _mm256_fnmadd_pd(k, _mm256_set1_pd(C->pio2_3), y);
    /* Estrin's scheme: short dependency chains */
    __m256d z = _mm256_mul_pd(y, y);
    __m256d z2 = _mm256_mul_pd(z, z);
    __m256d z4 = _mm256_mul_pd(z2, z2);
#define SET(i, sgn) _mm256_set1_pd((sgn) * f[i][0])
    /* sin y = y - y z (1/3! - z/5! + z^2/7! - z^3/9! + z^4/11! - z^5/13!) */
    __m256d s01 = _mm256_fmadd_pd(z, SET(5, -1), SET(3, 1));
    __m256d s23 = _mm256_fmadd_pd(z, SET(9, -1), SET(7, 1));
    __m256d s45 = _mm256_fmadd_pd(z, SET(13, -1), SET(11, 1));
    __m256d ps = _mm256_fmadd_pd(z4, s45, _mm256_fmadd_pd(z2, s23, s01));
    __m256d s = _mm256_fnmadd_pd(_mm256_mul_pd(y, z), ps, y);
    /* cos y = 1 - z/2! + z^2/4! - ... + z^7/14! */
    __m256d c01 = _mm256_fmadd_pd(z, SET(2, -1), _mm256_set1_pd(1.0));
    __m256d c23 = _mm256_fmadd_pd(z, SET(6, -1), SET(4, 1));
    __m256d c45 = _mm256_fmadd_pd(z, SET(10, -1), SET(8, 1));
    __m256d c67 = _mm256_fmadd_pd(z, SET(14, -1), SET(12, 1));
    __m256d chi = _mm256_fmadd_pd(z2, c67, c45);
    __m256d c = _mm256_fmadd_pd(z4, chi, _mm256_fmadd_pd(z2, c23, c01));
#undef SET
    /* quadrant q = k mod 4: sin = [S, C, -S, -C][q], cos = [C, -S, -C, S][q] */
    __m256i kb = _mm256_castpd_si256(kt);
    __m256d swap = _mm256_castsi256_pd(_mm256_slli_epi64(kb, 63));
    __m256d sv = _mm256_blendv_pd(s, c, swap);
    __m256d cv = _mm256_blendv_pd(c, s, swap);
    const __m256i two = _mm256_set1_epi64x(2);
    __m256i sgn_s = _mm256_slli_epi64(_mm256_and_si256(kb, two), 62);
    __m256i sgn_c = _mm256_slli_epi64(
        _mm256_and_si256(_mm256_add_epi64(kb, _mm256_set1_epi64x(1)), two), 62);
    sv = _mm256_xor_pd(sv, _mm256_castsi256_pd(sgn_s));
    cv = _mm256_xor_pd(cv, _mm256_castsi256_pd(sgn_c));
    __m256d bad = _mm256_castsi256_pd(near_midpoint2(sv, cv));
    __m256d ax = _mm256_andnot_pd(signbit, x);
    bad = _mm256_or_pd(bad, _mm256_cmp_pd(ax, _mm256_set1_pd(0x1p20), _CMP_NLT_UQ));
    bad = _mm256_or_pd(bad, _mm256_cmp_pd(ax, _mm256_set1_pd(0x1p-120), _CMP_LT_OQ));
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

TARGET void sinpe_rows_avx2(float *out, int64_t first_row, int64_t nrows,
                            const float *div, int64_t half)
{
    for (int64_t r = 0; r < nrows; r++) {
        float pos = (float)(first_row + r);
        __m128 vp = _mm_set1_ps(pos);
        float *dst = out + r * 2 * half;
        int64_t j = 0;
        for (; j + 4 <= half; j += 4) {
            __m128 a0 = _mm_mul_ps(vp, _mm_loadu_ps(div + j));
            __m128 s0, c0;
            int m0 = sincos4(a0, &s0, &c0);
            store4(dst + 2 * j, a0, s0, c0, m0);
        }
        for (; j < half; j++)
            sinpe_sincosf(pos * div[j], &dst[2 * j], &dst[2 * j + 1]);
    }
}

/* dst[2i] = s[i], dst[2i+1] = c[i] (the oneMKL path's store). */
TARGET void sinpe_interleave_avx2(const float *s, const float *c, float *dst, size_t n)
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

/* Elementwise sin/cos of n floats (for tests and tools). */
TARGET void sinpe_sincos_avx2(const float *a, float *s, float *c, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        __m128 x = _mm_loadu_ps(a + i), sv, cv;
        int m = sincos4(x, &sv, &cv);
        _mm_storeu_ps(s + i, sv);
        _mm_storeu_ps(c + i, cv);
        for (int l = 0; l < 4; l++)
            if ((m >> l) & 1)
                sinpe_sincosf(a[i + l], &s[i + l], &c[i + l]);
    }
    for (; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}
#endif
