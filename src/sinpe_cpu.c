/* CPU feature probe: AVX2 + FMA, with the OS's support for YMM state
 * (CPUID.1:ECX.OSXSAVE and XGETBV(0) bits 1-2), as the Intel SDM requires
 * before using VEX-encoded instructions. */
#include "sinpe_cpu.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

int sinpe_cpu_has_avx2_fma(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return 0;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    if (!(fma && osxsave && avx))
        return 0;
    if ((xgetbv0() & 0x6) != 0x6) /* XMM and YMM state enabled by the OS */
        return 0;
    if (__get_cpuid_max(0, NULL) < 7)
        return 0;
    __cpuid_count(7, 0, a, b, c, d);
    return (b >> 5) & 1; /* AVX2 */
}
#else
int sinpe_cpu_has_avx2_fma(void)
{
    return 0;
}
#endif
