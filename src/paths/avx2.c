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
 * `tools/exhaustive sin --kernel avx2` (and cos): the records below.
 */
#include "paths/path.h"
#include "paths/x86_order.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include <math.h>

#include "elem/constants.h"
#include "elem/crmath.h"
#include "elem/half.h"
#include "platform/cpu.h"

#define TARGET __attribute__((target("avx2,fma,f16c")))

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

static int avx2_supported(void)
{
    return sinpe_cpu_has_avx2_fma() && sinpe_cpu()->f16c;
}

static const sinpe_verification avx2_records[] = {
    { "sin", "an earlier project machine (x86-64, AVX2 + FMA)", "before 2026-12-01",
      4294967296u, 0, 186, "tools/exhaustive sin --kernel avx2" },
    { "cos", "an earlier project machine (x86-64, AVX2 + FMA)", "before 2026-12-01",
      4294967296u, 0, 182, "tools/exhaustive cos --kernel avx2" },
    { "sin", "AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL)", "2026-12-02 (loops from paths/body.h)", 4294967296u, 0, 155.6,
      "tools/exhaustive sin --kernel avx2" },
    { "cos", "AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL)", "2026-12-02 (loops from paths/body.h)", 4294967296u, 0, 180.1,
      "tools/exhaustive cos --kernel avx2" },
};

#define PATH_OPS sinpe_path_avx2
#define PATH_SUPPORTED avx2_supported
#define PATH_RECORDS avx2_records
#define PATH_TARGET TARGET
#define PATH_W 4
#define PATH_VF __m128
#define PATH_LOAD _mm_loadu_ps
#define PATH_STORE _mm_storeu_ps
#define PATH_SET1 _mm_set1_ps
#define PATH_MUL _mm_mul_ps
#define PATH_SINCOS sincos4
#define PATH_STORE_PAIRS(dst, s, c)                                                          \
    (_mm_storeu_ps((dst), _mm_unpacklo_ps((s), (c))),                                        \
     _mm_storeu_ps((dst) + 4, _mm_unpackhi_ps((s), (c))))
#define PATH_SW 8
#define PATH_SF __m256
#define PATH_SLOAD _mm256_loadu_ps
#define PATH_SSTORE _mm256_storeu_ps
#define PATH_SADD _mm256_add_ps
#define PATH_SMUL _mm256_mul_ps
#define PATH_SSET1 _mm256_set1_ps
#define PATH_SPAIRS avx2_spairs
#define PATH_ALIGN 32

/* 8 interleaved pairs from 8 sines and 8 cosines. */
TARGET static inline void avx2_spairs(float *dst, __m256 s, __m256 c)
{
    __m256 lo = _mm256_unpacklo_ps(s, c), hi = _mm256_unpackhi_ps(s, c);
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
    _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

/* The element conversions (elem/half.h's rules): F16C's vcvtps2ph rounds to nearest even
 * and quiets NaN keeping its top payload bits, as sinpe_f32_to_f16; bfloat16 by integer
 * steps, NaN to SINPE_BF16_NAN. */
/* float32 bits x rounded to nearest even at bit 16 (bfloat16's rounding, before the low half
 * is dropped; NaN is the caller's) */
TARGET static inline __m256i avx2_rne_bits(__m256i x)
{
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    return _mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd));
}

TARGET static inline __m256 avx2_rb(__m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i r = avx2_rne_bits(x);
    r = _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                     _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32((int)(SINPE_BF16_NAN << 16)), nan);
    return _mm256_castsi256_ps(r);
}

/* avx2_rb's rounding, the result's top half stored (NaN found by an unordered compare, one
 * operation where avx2_rb's integer test takes two). */
TARGET static inline void avx2_f2b(void *p, __m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i r = avx2_rne_bits(x);
    r = _mm256_blendv_epi8(_mm256_srli_epi32(r, 16), _mm256_set1_epi32((int)SINPE_BF16_NAN),
                           _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    _mm_storeu_si128((__m128i *)p, _mm_packus_epi32(_mm256_castsi256_si128(r),
                                                    _mm256_extracti128_si256(r, 1)));
}

X86_ORDERED_OPS(avx2, __m256, "x")

#define PATH_HALF 1
#define PATH_OADD avx2_oadd
#define PATH_OMUL avx2_omul
#define PATH_SNEG(v) _mm256_xor_ps((v), _mm256_set1_ps(-0.0f))
#define PATH_H2F(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define PATH_F2H(p, v)                                                                      \
    _mm_storeu_si128((__m128i *)(void *)(p), _mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define PATH_RH(v) _mm256_cvtph_ps(_mm256_cvtps_ph((v), _MM_FROUND_TO_NEAREST_INT))
#define PATH_B2F(p)                                                                         \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                                  \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(p))), 16))
#define PATH_F2B avx2_f2b
#define PATH_RB avx2_rb

#include "paths/body.h"
#endif
