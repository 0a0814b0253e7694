/* NEON (AArch64 Advanced SIMD) path of the built-in sin/cos: 2 double lanes
 * per vector, two vectors per 4 floats.
 *
 * Method: the AVX2 path's (paths/avx2.c), lane for lane: Cody-Waite with
 * pi/2 as double-double by fused multiply-adds (vfmsq_f64; the first step is
 * exact), the Chebyshev P and Q of tools/gen_constants.py by Estrin's scheme,
 * the rounding test on the 29 bits a float drops (within 2^13 ulps of the
 * midpoint, the lane is redone by the scalar kernel), and the range test
 * (|x| < 2^-120, |x| >= 2^20, NaN, inf: scalar).  Every lane's result is
 * either proven correctly rounded or recomputed by the correctly rounded
 * scalar kernel, so the bits equal the scalar path's.
 * Measured: tools/crosscheck, built for aarch64 and run under qemu-aarch64,
 * writes the same file as on x86-64 (the records below).
 */
#include "paths/path.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#include <math.h>

#include "elem/constants.h"
#include "elem/crmath.h"

/* sin and cos of 2 doubles (exact float values); returns a 2-bit mask of
 * the lanes to redo. */
static inline unsigned sincos2(float64x2_t x, float64x2_t *sv_out, float64x2_t *cv_out, int checked)
{
    const struct sinpe_consts *C = &SINPE_C;
    const float64x2_t shifter = vdupq_n_f64(C->shift);
    float64x2_t kt = vfmaq_f64(shifter, x, vdupq_n_f64(C->two_over_pi));
    float64x2_t k = vsubq_f64(kt, shifter);
    float64x2_t y = vfmsq_f64(x, k, vdupq_n_f64(C->pio2_hi));
    y = vfmsq_f64(y, k, vdupq_n_f64(C->pio2_lo));
    float64x2_t z = vmulq_f64(y, y), z2 = vmulq_f64(z, z), z4 = vmulq_f64(z2, z2);
    const double *p = C->sin_p, *q = C->cos_q;
#define B(v) vdupq_n_f64(v)
    float64x2_t ps = vfmaq_f64(vfmaq_f64(B(p[4]), z, B(p[3])), z2, vfmaq_f64(B(p[2]), z, B(p[1])));
    ps = vfmaq_f64(ps, z4, B(p[0]));
    float64x2_t s = vfmaq_f64(y, vmulq_f64(y, z), ps);
    float64x2_t pc = vfmaq_f64(vfmaq_f64(B(q[4]), z, B(q[3])), z2, vfmaq_f64(B(q[2]), z, B(q[1])));
    pc = vfmaq_f64(pc, z4, B(q[0]));
    float64x2_t c = vfmaq_f64(B(1.0), z, pc);
#undef B
    /* quadrant q = k mod 4: sin = [S, C, -S, -C][q], cos = [C, -S, -C, S][q] */
    uint64x2_t kb = vreinterpretq_u64_f64(kt);
    uint64x2_t swap = vtstq_u64(kb, vdupq_n_u64(1));
    const uint64x2_t sign = vdupq_n_u64(1ULL << 63);
    uint64x2_t b10 = vshlq_n_u64(kb, 62), b0 = vshlq_n_u64(kb, 63);
    float64x2_t sv = vbslq_f64(swap, c, s), cv = vbslq_f64(swap, s, c);
    sv = vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(sv), vandq_u64(b10, sign)));
    cv = vreinterpretq_f64_u64(veorq_u64(vreinterpretq_u64_f64(cv),
                                         vandq_u64(veorq_u64(b10, b0), sign)));
    /* rounding test: t = low29 - (2^28 - 2^13), near iff t <= 2^14 (unsigned) */
    const uint64x2_t m29 = vdupq_n_u64((1ULL << 29) - 1), lo = vdupq_n_u64((1ULL << 28) - (1ULL << 13));
    const uint64x2_t width = vdupq_n_u64(2ULL << 13);
    uint64x2_t ts = vsubq_u64(vandq_u64(vreinterpretq_u64_f64(sv), m29), lo);
    uint64x2_t tc = vsubq_u64(vandq_u64(vreinterpretq_u64_f64(cv), m29), lo);
    uint64x2_t bad = vorrq_u64(vcleq_u64(ts, width), vcleq_u64(tc, width));
    if (checked) {
        float64x2_t ax = vabsq_f64(x);
        uint64x2_t inside = vandq_u64(vcltq_f64(ax, vdupq_n_f64(0x1p20)),
                                      vcgeq_f64(ax, vdupq_n_f64(0x1p-120)));
        bad = vorrq_u64(bad, veorq_u64(inside, vdupq_n_u64(~0ULL)));
    }
    *sv_out = sv;
    *cv_out = cv;
    return (unsigned)(vgetq_lane_u64(bad, 0) & 1) | (unsigned)((vgetq_lane_u64(bad, 1) & 1) << 1);
}

/* 4 floats: sin to s, cos to c (float32x4 each); returns the 4-bit redo mask. */
static inline unsigned sincos4(float32x4_t a, float32x4_t *s, float32x4_t *c, int checked)
{
    float64x2_t s0, c0, s1, c1;
    unsigned m0 = sincos2(vcvt_f64_f32(vget_low_f32(a)), &s0, &c0, checked);
    unsigned m1 = sincos2(vcvt_high_f64_f32(a), &s1, &c1, checked);
    *s = vcvt_high_f32_f64(vcvt_f32_f64(s0), s1);
    *c = vcvt_high_f32_f64(vcvt_f32_f64(c0), c1);
    return m0 | (m1 << 2);
}

static int neon_supported(void)
{
    return 1; /* Advanced SIMD is part of every AArch64 CPU */
}

/* No exhaustive run on Arm hardware: tools/crosscheck under qemu-aarch64 (every 251st
 * pattern of sin and cos, and tables) gives the x86-64 build's bits; the registry picks
 * this path because it is the only vector path there (docs/numerics.md). */
static const sinpe_verification neon_records[] = {
    { "sin", "qemu-aarch64 7.2 on AMD EPYC (crosscheck, every 251st pattern)", "2026-12-01",
      17111424u, 0, 0, "make -C tools check-arm64" },
    { "cos", "qemu-aarch64 7.2 on AMD EPYC (crosscheck, every 251st pattern)", "2026-12-01",
      17111424u, 0, 0, "make -C tools check-arm64" },
};

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
#define PATH_RECORDS neon_records
#define PATH_TARGET
#define PATH_W 4
#define PATH_VF float32x4_t
#define PATH_LOAD vld1q_f32
#define PATH_STORE vst1q_f32
#define PATH_SET1 vdupq_n_f32
#define PATH_MUL vmulq_f32
#define PATH_SINCOS sincos4
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

#include "paths/body.h"
#endif
