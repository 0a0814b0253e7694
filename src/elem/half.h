/* float16 and bfloat16 from and to float32 (elem layer, pure C): the roundings of torch on
 * x86-64 and on 64-bit Arm, bit for bit (docs/numerics.md, "Other element types"):
 *  - float16: round to nearest even; NaN keeps its sign and top 10 payload bits and is made
 *    quiet (sign | 0x7e00 | payload >> 13), as F16C's vcvtps2ph does;
 *  - bfloat16: round to nearest even; every NaN becomes 0xffff on x86-64 (torch's
 *    vectorized cvtfp32_bf16), 0x7fc0 on 64-bit Arm (c10::BFloat16);
 *  - widening is exact (a signalling NaN stays signalling).
 * The vector paths (paths/body.h) do the same lane by lane. */
#ifndef SINPE_ELEM_HALF_H
#define SINPE_ELEM_HALF_H

#include <stdint.h>

#include "elem/bits.h"

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

#endif
