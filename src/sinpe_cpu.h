/* CPU feature probe and kernel paths (internal, pure C). */
#ifndef SINPE_CPU_H
#define SINPE_CPU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

/* Writes nrows rows of the table (2*half floats per row, contiguous) with
 * the built-in correctly rounded sin/cos; div has half entries.  Row r is at
 * position pos[r] when pos is not NULL, else at (float)(first_row + r). */
typedef void (*sinpe_rows_fn)(float *out, const float *pos, int64_t first_row, int64_t nrows,
                              const float *div, int64_t half);

/* s[i] = sin(a[i]), c[i] = cos(a[i]) for i < n, correctly rounded. */
typedef void (*sinpe_sincos_fn)(const float *a, float *s, float *c, size_t n);

/* Portable scalar path (sinpe_core.c). */
void sinpe_rows_scalar(float *out, const float *pos, int64_t first_row, int64_t nrows,
                       const float *div, int64_t half);

/* The vector paths test the range of their lanes only in rows whose angles
 * can leave [2^-120, 2^20): pos * div[j] lies between |pos|*dmin and
 * |pos|*dmax.  div_range finds dmin and dmax once per call. */
static inline void sinpe_div_range(const float *div, int64_t half, float *dmin, float *dmax)
{
    float lo = INFINITY, hi = 0.0f;
    for (int64_t j = 0; j < half; j++) {
        lo = div[j] < lo ? div[j] : lo;
        hi = div[j] > hi ? div[j] : hi;
    }
    *dmin = lo;
    *dmax = hi;
}

static inline int sinpe_row_needs_range_test(float pos, float dmin, float dmax)
{
    double apos = fabs((double)pos);
    return !(apos * dmax < 0x1p20 * (1 - 0x1p-20) && apos * dmin > 0x1p-119);
}

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
