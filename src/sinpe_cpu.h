/* CPU feature probes (internal, pure C). */
#ifndef SINPE_CPU_H
#define SINPE_CPU_H

#include "sinpe_core.h" /* sinpe_cpu_info */

/* 1 when the CPU and the OS support AVX2 and FMA (YMM state enabled). */
int sinpe_cpu_has_avx2_fma(void);

#endif
