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
#include "elem/half.h"
#include "paths/path.h"
#include "sinpe.h"

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
