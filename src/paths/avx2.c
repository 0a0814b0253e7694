/* AVX2 + FMA path of the built-in sin/cos: 4 double lanes per vector.
 *
 * Method, range and error: paths/sincos_body.h's, compiled here over AVX2's lanes (the
 * fused steps are vfmadd/vfnmadd); AVX2 has no unsigned 64-bit compare, so the rounding
 * test packs sin's and cos's dropped bits into one vector of 8 int32 (PATH_NEAR2 below).
 * Measured: 0 differences from MPFR over all 2^32 inputs with
 * `tools/exhaustive sin --kernel avx2` (and cos): its records in paths/records.c.
 */
#include "paths/path.h"
#include "paths/x86_order.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "elem/crmath.h"
#include "elem/half.h"
#include "platform/cpu.h"

#define TARGET __attribute__((target("avx2,fma,f16c")))

/* Rounding test of sin and cos at once: the low 32 bits of each double hold the 29 bits a
 * float drops; both results' words go into one vector of 8 int32 and are compared with the
 * midpoint 2^28.  Returns, per 32-bit half (sin's low, cos's high), all ones when that
 * result lies within 2^13 ulps of a midpoint. */
TARGET static inline __m256d avx2_near2(__m256d sv, __m256d cv)
{
    __m256i both = _mm256_blend_epi32(_mm256_castpd_si256(sv),
                                      _mm256_slli_epi64(_mm256_castpd_si256(cv), 32), 0xAA);
    /* t = low29 - (2^28 - 2^13), and near iff t <= 2^14 as unsigned (SINPE_SC's drop,
     * near_lo and near_width, as int32) */
    __m256i t = _mm256_sub_epi32(_mm256_and_si256(both, _mm256_set1_epi32((1 << 29) - 1)),
                                 _mm256_set1_epi32((1 << 28) - (1 << 13)));
    return _mm256_castsi256_pd(
        _mm256_cmpeq_epi32(_mm256_min_epu32(t, _mm256_set1_epi32(2 << 13)), t));
}

/* A mask's lanes as bits: a lane is set when either 32-bit half's top bit is (avx2_near2
 * sets one half, the compares both). */
TARGET static inline unsigned avx2_mbits(__m256d bad)
{
    int m8 = _mm256_movemask_ps(_mm256_castpd_ps(bad)); /* one bit per 32-bit half */
    if (!m8)
        return 0;
    int m = m8 | (m8 >> 1);
    return (unsigned)((m & 1) | ((m >> 1) & 2) | ((m >> 2) & 4) | ((m >> 3) & 8));
}

static int avx2_supported(void)
{
    return sinpe_cpu_has_avx2_fma() && sinpe_cpu()->f16c;
}

#define PATH_OPS sinpe_path_avx2
#define PATH_SUPPORTED avx2_supported
#define PATH_TARGET TARGET
#define PATH_W 4
#define PATH_VF __m128
#define PATH_LOAD _mm_loadu_ps
#define PATH_STORE _mm_storeu_ps
#define PATH_SET1 _mm_set1_ps
#define PATH_MUL _mm_mul_ps
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

/* The double lanes of paths/sincos_body.h: a mask is a vector whose lane is set when a
 * 32-bit half's top bit is (vblendvpd reads the high half's; PATH_IODD sets it). */
#define PATH_DW 4
#define PATH_VD __m256d
#define PATH_VI __m256i
#define PATH_VM __m256d
#define PATH_DSET1 _mm256_set1_pd
#define PATH_DSUB _mm256_sub_pd
#define PATH_DMUL _mm256_mul_pd
#define PATH_DFMA _mm256_fmadd_pd
#define PATH_DFNMA _mm256_fnmadd_pd
#define PATH_DABS(a) _mm256_andnot_pd(_mm256_set1_pd(-0.0), (a))
#define PATH_DNLT(a, b) _mm256_cmp_pd((a), (b), _CMP_NLT_UQ)
#define PATH_DLT(a, b) _mm256_cmp_pd((a), (b), _CMP_LT_OQ)
#define PATH_DBITS _mm256_castpd_si256
#define PATH_ISET1(x) _mm256_set1_epi64x((long long)(x))
#define PATH_ISHL _mm256_slli_epi64
#define PATH_IXOR _mm256_xor_si256
#define PATH_IODD(a) _mm256_castsi256_pd(_mm256_slli_epi64((a), 63))
#define PATH_DBLEND(m, a, b) _mm256_blendv_pd((a), (b), (m))
#define PATH_DFLIP(v, i)                                                                     \
    _mm256_xor_pd((v), _mm256_castsi256_pd(_mm256_and_si256((i), PATH_ISET1(SINPE_SC.sign))))
#define PATH_MOR _mm256_or_pd
#define PATH_MBITS avx2_mbits
#define PATH_NEAR2 avx2_near2
#define PATH_F2D _mm256_cvtps_pd
#define PATH_D2F _mm256_cvtpd_ps

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
/* [a0 b0 a1 b1 ..] -> [-b0 a0 -b1 a1 ..]: pairs swapped, the even lanes' signs flipped */
#define PATH_SWAPNEG(v)                                                                     \
    _mm256_xor_ps(_mm256_permute_ps((v), 0xB1),                                             \
                  _mm256_castsi256_ps(_mm256_set1_epi64x(0x80000000LL)))
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
