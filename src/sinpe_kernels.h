/* Internal declarations of the correctly rounded float32 kernels (built-in
 * backend).  Pure C, no Python headers. */
#ifndef SINPE_KERNELS_H
#define SINPE_KERNELS_H

#include <stddef.h>

/* Correctly rounded (round to nearest, ties to even) for every float input. */
float sinpe_expf(float x);
float sinpe_sinf(float x);
float sinpe_cosf(float x);
void sinpe_sincosf(float x, float *s, float *c);

/* Built with -DSINPE_COUNT_SLOW (tools only), each thread counts how often
 * the slow paths ran. */
#ifdef SINPE_COUNT_SLOW
extern _Thread_local unsigned long long sinpe_exp_slow_count, sinpe_sincos_slow_count;
#define SINPE_COUNT(c) ((c)++)
#else
#define SINPE_COUNT(c) ((void)0)
#endif

#endif
