/* CPU feature probes (internal, pure C). */
#ifndef SINPE_CPU_H
#define SINPE_CPU_H

/* 1 when the CPU and the OS support AVX2 and FMA (YMM state enabled). */
int sinpe_cpu_has_avx2_fma(void);

#endif
