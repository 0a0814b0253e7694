/* glibc's float32 sinf, cosf, expf (2.28 on) and logf (2.27 on) (element layer, pure C): elem/glibcf.c.
 * powf is elem/powf.h's sinpe_powf_glibc. */
#ifndef SINPE_ELEM_GLIBCF_H
#define SINPE_ELEM_GLIBCF_H

/* `fused`: glibc's x86-64 FMA variants (__sinf_fma, __cosf_fma, __expf_fma, chosen by its
 * ifunc on CPUs with FMA and AVX2; AArch64 contracts the same way), else the SSE2 form. */
float sinpe_glibc_sinf(float x, int fused);
float sinpe_glibc_cosf(float x, int fused);
float sinpe_glibc_expf(float x, int fused);
float sinpe_glibc_logf(float x, int fused);

/* The float NaN an invalid operation makes on x86-64 (sign set, quiet, no payload): what
 * glibc returns for sin/cos of an infinity there. */
#define SINPE_X86_DEFAULT_NAN 0xffc00000u

#endif
