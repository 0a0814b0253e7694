/* Storing float32 table values into destinations of any element type and
 * stride (internal, pure C).
 *
 * Rounding follows torch on x86-64 (measured with torch 2.13.0, CPU
 * capabilities DEFAULT, AVX2 and AVX512; docs/numerics.md):
 *  - float16: round to nearest even; NaN keeps its sign and top 10 payload
 *    bits and is made quiet (sign | 0x7e00 | payload >> 13), as F16C's
 *    vcvtps2ph and torch's .half() do.
 *  - bfloat16: round to nearest even; every NaN becomes 0xffff, as torch's
 *    vectorized .bfloat16() does with the AVX2 and AVX512 capabilities
 *    (aten/src/ATen/cpu/vec/vec256/vec256_bfloat16.h: cvtfp32_bf16; its
 *    DEFAULT capability gives 0x7fc0; ml_dtypes gives 0x7fc0 / 0xffc0).
 *  - float64: exact.
 * torch on 64-bit Arm (2.13.0 under qemu, capability DEFAULT: tools/arm64-suite.sh) rounds
 * the same but for NaN: bfloat16 NaN becomes 0x7fc0 (c10::BFloat16's rule) and a float16
 * x.add_(pe) gives 0x7fff for every NaN result, so an AArch64 build of sinpe does the same
 * (SINPE_ARM_NAN).
 * In-place adds are torch's x.add_(pe) with a float32 pe: float16 and
 * bfloat16 x are widened to float32, added in float32 and rounded once;
 * float64 x adds the widened pe in float64; float32 adds in float32.
 * Every load and store goes through memcpy, so destinations need not be
 * aligned. */
#ifndef SINPE_STORE_H
#define SINPE_STORE_H

#include <stdint.h>
#include <string.h>

#include "elem/bits.h"
#include "paths/path.h"
#include "sinpe.h"

static inline uint16_t sinpe_f32_to_f16(float f)
{
    uint32_t x = sinpe_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) /* NaN: quiet, top payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((ax & 0x7fffffu) >> 13));
    if (ax >= 0x477ff000u) /* >= 65520 (and inf): rounds to inf */
        return (uint16_t)(sign | 0x7c00u);
    if (ax >= 0x38800000u) { /* >= 2^-14: a normal half */
        uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u) - (112u << 23);
        return (uint16_t)(sign | (r >> 13));
    }
    uint32_t e = ax >> 23; /* a subnormal half or zero: units of 2^-24 */
    if (e < 102u)          /* < 2^-25: rounds to zero (2^-25 itself is a tie to 0) */
        return sign;
    uint32_t m = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e; /* 14 .. 24 */
    uint32_t q = m >> shift, rem = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u)))
        q++;
    return (uint16_t)(sign | q);
}

static inline float sinpe_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu)
        return sinpe_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e)
        return sinpe_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
    float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
    return sign ? -v : v;
}

#if defined(__aarch64__) || defined(_M_ARM64)
#define SINPE_ARM_NAN 1
#define SINPE_BF16_NAN 0x7fc0u
#else
#define SINPE_ARM_NAN 0
#define SINPE_BF16_NAN 0xffffu
#endif

static inline uint16_t sinpe_f32_to_bf16(float f)
{
    uint32_t x = sinpe_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return SINPE_BF16_NAN;
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static inline float sinpe_bf16_to_f32(uint16_t h)
{
    return sinpe_bits_f32((uint32_t)h << 16);
}

/* How table values reach one destination: its type, whether to add, the
 * byte stride between columns, and whether the fast float32 route applies
 * (float32, contiguous columns, 4-byte aligned). */
typedef struct {
    sinpe_type type;
    int add;
    int64_t cstride;
    int fast;
    const sinpe_path_ops *path;
} sinpe_emitter;

/* dst[k * cstride] = (or +=) pe[k] for k < n, in the destination's type. */
void sinpe_emit(const sinpe_emitter *e, char *dst, const float *pe, int64_t n);

/* Position values of any type, rounded to float32 as torch's .float() does
 * (round to nearest even from integers and float64). */
float sinpe_load_position(const char *p, sinpe_type t);

#endif
