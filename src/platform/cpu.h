/* The CPU probe (platform layer, pure C): once per process, what the vector code paths and
 * the SLEEF functions may use.  x86 flags count only when the OS saves the registers (YMM
 * for AVX2/FMA, ZMM and opmask for AVX-512). */
#ifndef SINPE_PLATFORM_CPU_H
#define SINPE_PLATFORM_CPU_H

typedef struct {
    char vendor[16]; /* "GenuineIntel", "AuthenticAMD", "arm64", ... */
    int fma, avx2, avx512f, avx512dq, avx512bw, avx512vl, f16c, os_ymm, os_zmm, neon;
} sinpe_cpu_info;

const sinpe_cpu_info *sinpe_cpu(void);

/* 1 when the CPU and the OS support AVX2 and FMA (YMM state enabled). */
int sinpe_cpu_has_avx2_fma(void);

#endif
