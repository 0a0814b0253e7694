/* float32 pow as torch computes it on CPU (element layer, pure C): elem/powf.c. */
#ifndef SINPE_ELEM_POWF_H
#define SINPE_ELEM_POWF_H

#include <stdint.h>

/* glibc's powf (since 2.28), with its multiply-adds fused or not. */
float sinpe_powf_glibc(float x, float y, int fused);
/* The same under FTZ and DAZ (JAX's jnp.power on x86-64). */
float sinpe_powf_glibc_ftz(float x, float y, int fused);
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

/* torch.pow of elements e0 .. e0+n-1 of a tensor of `total` elements: base x (a scalar) to
 * y[i], into out[i].  torch's vector loop takes 2 vectors per step through SLEEF and leaves
 * the rest of each thread chunk to the C library's powf, so an element's function depends
 * on where it lies in its chunk. */
void sinpe_torch_powf(float x, const float *y, float *out, int64_t e0, int64_t n, int64_t total,
                      const sinpe_pow_profile *p);

#endif
