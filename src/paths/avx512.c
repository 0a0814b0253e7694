/* AVX-512F path of the built-in sin/cos: 8 double lanes per vector.
 *
 * Method, range and error: paths/sincos_body.h's, compiled here over AVX-512F's lanes (the
 * fused steps are vfmadd/vfnmadd, masks are mask registers, a sign flip is one
 * ternary-logic op); every operation is the same IEEE double operation as on the AVX2 path,
 * in the same order, so each lane's double is the same and the same lanes are redone: the
 * same bits as the scalar kernel (correctly rounded).
 * Range: every float.  Measured: tools/exhaustive sin --kernel avx512 and cos over all
 * 2^32 inputs, 0 differences from the scalar kernel (its records in paths/records.c; the registry
 * chooses this path by itself only with them).
 * Needs AVX-512F only (the probe also checks that the OS saves ZMM state).
 */
#include "paths/path.h"
#include "paths/x86_order.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>

#include "elem/crmath.h"
#include "elem/half.h"
#include "platform/cpu.h"

#define TARGET __attribute__((target("avx512f")))

static int avx512_supported(void)
{
    const sinpe_cpu_info *c = sinpe_cpu();
    return c->avx512f && c->os_zmm && c->fma;
}

/* s0 c0 s1 c1 ... of 8 pairs in one two-source permute: index i < 16 picks s[i], 16 + i c[i] */
TARGET static inline void avx512_pairs8(float *dst, __m256 s, __m256 c)
{
    const __m512i idx = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    _mm512_storeu_ps(dst, _mm512_permutex2var_ps(_mm512_castps256_ps512(s), idx,
                                                 _mm512_castps256_ps512(c)));
}

/* 16 interleaved pairs from 16 sines and 16 cosines. */
TARGET static inline void avx512_pairs16(float *dst, __m512 s, __m512 c)
{
    const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                        24, 8);
    _mm512_storeu_ps(dst, _mm512_permutex2var_ps(s, lo, c));
    _mm512_storeu_ps(dst + 16, _mm512_permutex2var_ps(s, hi, c));
}

#define PATH_OPS sinpe_path_avx512
#define PATH_SUPPORTED avx512_supported
#define PATH_TARGET TARGET
#define PATH_W 8
#define PATH_VF __m256
#define PATH_LOAD _mm256_loadu_ps
#define PATH_STORE _mm256_storeu_ps
#define PATH_SET1 _mm256_set1_ps
#define PATH_MUL _mm256_mul_ps
#define PATH_STORE_PAIRS avx512_pairs8
#define PATH_SW 16
#define PATH_SF __m512
#define PATH_SLOAD _mm512_loadu_ps
#define PATH_SSTORE _mm512_storeu_ps
#define PATH_SADD _mm512_add_ps
#define PATH_SMUL _mm512_mul_ps
#define PATH_SSET1 _mm512_set1_ps
#define PATH_SPAIRS avx512_pairs16
#define PATH_ALIGN 64

/* The double lanes of paths/sincos_body.h (a sign flip a ^ (b & sign) in one ternary-logic
 * op: truth table 0x78). */
#define PATH_DW 8
#define PATH_VD __m512d
#define PATH_VI __m512i
#define PATH_VM __mmask8
#define PATH_DSET1 _mm512_set1_pd
#define PATH_DSUB _mm512_sub_pd
#define PATH_DMUL _mm512_mul_pd
#define PATH_DFMA _mm512_fmadd_pd
#define PATH_DFNMA _mm512_fnmadd_pd
#define PATH_DABS(a)                                                                        \
    _mm512_castsi512_pd(_mm512_andnot_epi64(PATH_ISET1(SINPE_SC.sign), _mm512_castpd_si512(a)))
#define PATH_DNLT(a, b) _mm512_cmp_pd_mask((a), (b), _CMP_NLT_UQ)
#define PATH_DLT(a, b) _mm512_cmp_pd_mask((a), (b), _CMP_LT_OQ)
#define PATH_DBITS _mm512_castpd_si512
#define PATH_ISET1(x) _mm512_set1_epi64((long long)(x))
#define PATH_ISHL _mm512_slli_epi64
#define PATH_IXOR _mm512_xor_epi64
#define PATH_IAND _mm512_and_epi64
#define PATH_ISUB _mm512_sub_epi64
#define PATH_ILEU _mm512_cmple_epu64_mask
#define PATH_IODD(a) _mm512_test_epi64_mask((a), PATH_ISET1(1))
#define PATH_DBLEND _mm512_mask_blend_pd
#define PATH_DFLIP(v, i)                                                                     \
    _mm512_castsi512_pd(                                                                     \
        _mm512_ternarylogic_epi64(_mm512_castpd_si512(v), (i), PATH_ISET1(SINPE_SC.sign), 0x78))
#define PATH_MOR(a, b) ((__mmask8)((a) | (b)))
#define PATH_MBITS(m) ((unsigned)(m))
#define PATH_F2D _mm512_cvtps_pd
#define PATH_D2F _mm512_cvtpd_ps

/* The element conversions (elem/half.h's rules; as the AVX2 path's). */
/* float32 bits x rounded to nearest even at bit 16 (bfloat16's rounding, before the low half
 * is dropped; NaN is the caller's): x + 0x7fff, plus 1 where bit 16 is set (a bit test and a
 * masked add, where a shift and an and take two) */
TARGET static inline __m512i avx512_rne_bits(__m512i x)
{
    __mmask16 odd = _mm512_test_epi32_mask(x, _mm512_set1_epi32(0x10000));
    __m512i t = _mm512_add_epi32(x, _mm512_set1_epi32(0x7fff));
    return _mm512_mask_add_epi32(t, odd, t, _mm512_set1_epi32(1));
}

/* v rounded to bfloat16 as float32: NaN found by an unordered compare, the low half dropped
 * by a masked and that leaves the NaN lanes bfloat16's NaN (one operation for both). */
TARGET static inline __m512 avx512_rb(__m512 v)
{
    __m512i r = avx512_rne_bits(_mm512_castps_si512(v));
    __mmask16 num = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    r = _mm512_mask_and_epi32(_mm512_set1_epi32((int)(SINPE_BF16_NAN << 16)), num, r,
                              _mm512_set1_epi32((int)0xffff0000u));
    return _mm512_castsi512_ps(r);
}

/* avx512_rb's rounding, the result's top half stored. */
TARGET static inline void avx512_f2b(void *p, __m512 v)
{
    __m512i x = _mm512_castps_si512(v);
    __m512i r = avx512_rne_bits(x);
    r = _mm512_mask_mov_epi32(_mm512_srli_epi32(r, 16), _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                              _mm512_set1_epi32((int)SINPE_BF16_NAN));
    _mm256_storeu_si256((__m256i *)p, _mm512_cvtepi32_epi16(r));
}

#define AVX512_RNE (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
X86_ORDERED_OPS(avx512, __m512, "v")

#define PATH_HALF 1
#define PATH_OADD avx512_oadd
#define PATH_OMUL avx512_omul
#define PATH_SNEG(v) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v),                \
                                                          _mm512_set1_epi32((int)0x80000000u)))
/* [a0 b0 a1 b1 ..] -> [-b0 a0 -b1 a1 ..]: pairs swapped, the even lanes' signs flipped */
#define PATH_SWAPNEG(v)                                                                     \
    _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(_mm512_permute_ps((v), 0xB1)), \
                                         _mm512_set1_epi64(0x80000000LL)))
#define PATH_H2F(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define PATH_F2H(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), _mm512_cvtps_ph((v), AVX512_RNE))
#define PATH_RH(v) _mm512_cvtph_ps(_mm512_cvtps_ph((v), AVX512_RNE))
#define PATH_B2F(p)                                                                         \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                                  \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)(p))), 16))
#define PATH_F2B avx512_f2b
#define PATH_RB avx512_rb

#include "paths/body.h"
#endif
