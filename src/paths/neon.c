/* NEON (AArch64 Advanced SIMD) path of the built-in sin/cos: 2 double lanes per vector,
 * two vectors per 4 floats.
 *
 * Method, range and error: paths/sincos_body.h's, compiled here over NEON's lanes (the
 * fused steps are vfmaq_f64/vfmsq_f64; the first step of the reduction is exact), lane for
 * lane the AVX2 path's: every lane's result is either proven correctly rounded or
 * recomputed by the correctly rounded scalar kernel, so the bits equal the scalar path's.
 * Measured: tools/crosscheck, built for aarch64 and run under qemu-aarch64, writes the same
 * file as on x86-64 (its records in paths/records.c).
 */
#include "paths/path.h"

#if defined(__aarch64__)
#include <arm_neon.h>

#include "elem/crmath.h"

/* All ones where a is not below b (NaN included): NEON's compares are ordered. */
static inline uint64x2_t neon_nlt(float64x2_t a, float64x2_t b)
{
    return veorq_u64(vcltq_f64(a, b), vdupq_n_u64(~0ULL));
}

static inline unsigned neon_mbits(uint64x2_t m)
{
    return (unsigned)(vgetq_lane_u64(m, 0) & 1) | (unsigned)((vgetq_lane_u64(m, 1) & 1) << 1);
}

static int neon_supported(void)
{
    return 1; /* Advanced SIMD is part of every AArch64 CPU */
}

static inline void neon_pairs4(float *dst, float32x4_t s, float32x4_t c)
{
    vst1q_f32(dst, vzip1q_f32(s, c));
    vst1q_f32(dst + 4, vzip2q_f32(s, c));
}

static inline void neon_pairs_st2(float *dst, float32x4_t s, float32x4_t c)
{
    float32x4x2_t sc = { { s, c } };
    vst2q_f32(dst, sc);
}

#define PATH_OPS sinpe_path_neon
#define PATH_SUPPORTED neon_supported
#define PATH_TARGET
#define PATH_W 4
#define PATH_VF float32x4_t
#define PATH_LOAD vld1q_f32
#define PATH_STORE vst1q_f32
#define PATH_SET1 vdupq_n_f32
#define PATH_MUL vmulq_f32
#define PATH_STORE_PAIRS neon_pairs4
#define PATH_SW 4
#define PATH_SF float32x4_t
#define PATH_SLOAD vld1q_f32
#define PATH_SSTORE vst1q_f32
#define PATH_SADD vaddq_f32
#define PATH_SMUL vmulq_f32
#define PATH_SSET1 vdupq_n_f32
#define PATH_SPAIRS neon_pairs_st2
#define PATH_ALIGN 16

/* The double lanes of paths/sincos_body.h: two vectors per PATH_VF. */
#define PATH_DW 2
#define PATH_VD float64x2_t
#define PATH_VI uint64x2_t
#define PATH_VM uint64x2_t
#define PATH_DSET1 vdupq_n_f64
#define PATH_DSUB vsubq_f64
#define PATH_DMUL vmulq_f64
#define PATH_DFMA(a, b, c) vfmaq_f64((c), (a), (b))
#define PATH_DFNMA(a, b, c) vfmsq_f64((c), (a), (b))
#define PATH_DABS vabsq_f64
#define PATH_DNLT neon_nlt
#define PATH_DLT vcltq_f64
#define PATH_DBITS vreinterpretq_u64_f64
#define PATH_ISET1(x) vdupq_n_u64((uint64_t)(x))
#define PATH_ISHL vshlq_n_u64
#define PATH_IXOR veorq_u64
#define PATH_IAND vandq_u64
#define PATH_ISUB vsubq_u64
#define PATH_ILEU vcleq_u64
#define PATH_IODD(a) vtstq_u64((a), vdupq_n_u64(1))
#define PATH_DBLEND(m, a, b) vbslq_f64((m), (b), (a))
#define PATH_DFLIP(v, i)                                                                     \
    vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(v),                                \
                                    vandq_u64((i), PATH_ISET1(SINPE_SC.sign))))
#define PATH_MOR vorrq_u64
#define PATH_MBITS neon_mbits
#define PATH_F2D_LO(v) vcvt_f64_f32(vget_low_f32(v))
#define PATH_F2D_HI vcvt_high_f64_f32
#define PATH_D2F2(lo, hi) vcvt_high_f32_f64(vcvt_f32_f64(lo), (hi))

#include "paths/body.h"
#endif
