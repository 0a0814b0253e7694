/* CPU feature probe and kernel paths (internal, pure C). */
#ifndef SINPE_CPU_H
#define SINPE_CPU_H

#include <stddef.h>
#include <stdint.h>

/* Writes nrows rows of the table (2*half floats per row, contiguous) with
 * the built-in correctly rounded sin/cos; div has half entries.  Row r is at
 * position pos[r] when pos is not NULL, else at (float)(first_row + r). */
typedef void (*sinpe_rows_fn)(float *out, const float *pos, int64_t first_row, int64_t nrows,
                              const float *div, int64_t half);

/* Portable scalar path (sinpe_core.c). */
void sinpe_rows_scalar(float *out, const float *pos, int64_t first_row, int64_t nrows,
                       const float *div, int64_t half);

/* 1 when the CPU and the OS support AVX2 and FMA (YMM state enabled). */
int sinpe_cpu_has_avx2_fma(void);

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SINPE_HAVE_AVX2_KERNEL 1
void sinpe_rows_avx2(float *out, const float *pos, int64_t first_row, int64_t nrows,
                     const float *div, int64_t half);
void sinpe_sincos_avx2(const float *a, float *s, float *c, size_t n);
void sinpe_interleave_avx2(const float *s, const float *c, float *dst, size_t n);
void sinpe_add_avx2(float *x, const float *pe, int64_t n);
#endif

#if defined(__aarch64__)
#define SINPE_HAVE_NEON_KERNEL 1 /* Advanced SIMD is part of every AArch64 CPU */
void sinpe_rows_neon(float *out, const float *pos, int64_t first_row, int64_t nrows,
                     const float *div, int64_t half);
void sinpe_sincos_neon(const float *a, float *s, float *c, size_t n);
#endif

/* Elementwise sin/cos of n floats by the scalar kernel. */
void sinpe_sincos_scalar(const float *a, float *s, float *c, size_t n);

#endif
