/* torch-on-aarch64's SLEEF functions, re-implemented (element layer, pure C): elem/sleef.c. */
#ifndef SINPE_ELEM_SLEEF_H
#define SINPE_ELEM_SLEEF_H

#include <stddef.h>

/* Which SLEEF sin/cos torch on 64-bit Arm calls (exp is always u10); the values are the
 * public sinpe_opts.sleef.trig's. */
typedef enum {
    SINPE_SLEEF_U10 = 0, /* Sleef_{sin,cos}f4_u10 / f8_u10: torch 2.13, 2.14 */
    SINPE_SLEEF_U35 = 1  /* Sleef_{sin,cos}f4_u35 / f8_u35: torch 2.15 */
} sinpe_sleef_trig;

/* SLEEF's Sleef_expf4_u10 (lane-independent): one value, n values. */
float sinpe_sleef_expf(float d);
void sinpe_sleef_exp(const float *in, float *out, size_t n);

/* The reduction path an element needs: u10 0 (|d| < 125) or 1; u35 0, 1 (|d| < 39000) or 2.
 * A vector takes the largest path of its elements. */
int sinpe_sleef_path(sinpe_sleef_trig trig, float d);

/* sin and cos of n elements, all evaluated on the given path (s or c NULL: not wanted). */
void sinpe_sleef_sincos(sinpe_sleef_trig trig, int path, const float *a, float *s, float *c,
                        size_t n);

/* SLEEF's Sleef_powf*_u10 (FMA builds; lane-independent).  x86: x86-64's float-to-int
 * conversion (it matters only when |y log x| > 2^31), else AArch64's. */
float sinpe_sleef_powf(float x, float y, int x86);
/* The same function as compiled for this CPU (FMA or not), chosen once by the caller of an
 * element loop, which then calls it per element without asking the CPU probe. */
typedef float (*sinpe_sleef_powf_fn)(float x, float y, int x86);
sinpe_sleef_powf_fn sinpe_sleef_powf_for_cpu(void);

#endif
