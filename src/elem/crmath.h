/* The correctly rounded float32 functions of the built-in backend (element layer, pure C):
 * elem/expf.c, elem/sincosf.c, elem/powf_cr.c.  Each returns the float nearest the exact
 * value (ties to even) for every input; the method and error bounds are in each file's
 * header comment, the exhaustive checks in docs/numerics.md. */
#ifndef SINPE_ELEM_CRMATH_H
#define SINPE_ELEM_CRMATH_H

float sinpe_expf(float x);
float sinpe_sinf(float x);
float sinpe_cosf(float x);
void sinpe_sincosf(float x, float *s, float *c);

/* x ** y for x > 0 finite and y finite; other inputs take C99's special values. */
float sinpe_powf_cr(float x, float y);

/* Built with -DSINPE_COUNT_SLOW (tools only), each thread counts how often the slow paths
 * ran. */
#ifdef SINPE_COUNT_SLOW
extern _Thread_local unsigned long long sinpe_exp_slow_count, sinpe_sincos_slow_count;
#define SINPE_COUNT(c) ((c)++)
#else
#define SINPE_COUNT(c) ((void)0)
#endif

#endif
