/* float32 pow as torch computes it on CPU (internal, pure C): sinpe_powf.c. */
#ifndef SINPE_POWF_H
#define SINPE_POWF_H

#include <stdint.h>

/* glibc's powf (since 2.28), with its multiply-adds fused or not. */
float sinpe_powf_glibc(float x, float y, int fused);
/* Whether this platform's glibc runs its fused form (x86-64 with FMA and AVX2, AArch64). */
int sinpe_glibc_powf_fused(void);

/* How one torch build evaluates float32 pow. */
typedef struct {
    int lanes;   /* floats per vector (16 AVX512, 8 AVX2, 4 NEON); 0: DEFAULT capability */
    int x86;     /* SLEEF's x86-64 conversions (else AArch64's) */
    int fused;   /* the C library's powf is glibc's fused form (when not system) */
    int system;  /* the rest through this process's own powf (torch's std::pow here) */
    int threads; /* torch's threads (its chunks of grain 32768) */
} sinpe_pow_profile;

/* torch.pow of n elements: base x[i * xstride] (xstride 0: a scalar base) to y[i]. Its
 * vector loop takes 2 vectors per step through SLEEF and leaves the rest of each thread
 * chunk to the C library's powf. */
void sinpe_torch_powf(const float *x, int64_t xstride, const float *y, float *out, int64_t n,
                      const sinpe_pow_profile *p);

/* Correctly rounded powf for x > 0 finite and y finite (the built-in backend); other
 * inputs take C99's special values. */
float sinpe_powf_cr(float x, float y);

#endif
