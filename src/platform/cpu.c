/* CPU feature probe, once per process: the vendor, AVX2 + FMA with the OS's
 * support for YMM state (CPUID.1:ECX.OSXSAVE and XGETBV(0) bits 1-2), and
 * AVX-512F/DQ with ZMM state (XGETBV(0) bits 5-7 too), as the Intel SDM
 * requires before using VEX / EVEX encoded instructions. */
#include "platform/cpu.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void probe(sinpe_cpu_info *info)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    memcpy(info->vendor, &b, 4);
    memcpy(info->vendor + 4, &d, 4);
    memcpy(info->vendor + 8, &c, 4);
    unsigned max = a;
    __cpuid(1, a, b, c, d);
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    info->f16c = (c >> 29) & 1;
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    info->os_ymm = (xcr0 & 0x6) == 0x6;            /* XMM and YMM state */
    info->os_zmm = info->os_ymm && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */
    if (max < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    info->fma = fma && avx && info->os_ymm;
    info->avx2 = info->fma && ((b >> 5) & 1);
    info->avx512f = info->avx2 && info->os_zmm && ((b >> 16) & 1);
    info->avx512dq = info->avx512f && ((b >> 17) & 1);
    info->avx512bw = info->avx512f && ((b >> 30) & 1);
    info->avx512vl = info->avx512f && ((b >> 31) & 1);
}
#elif defined(__aarch64__)
static void probe(sinpe_cpu_info *info)
{
    memcpy(info->vendor, "arm64", 6);
    info->neon = 1; /* Advanced SIMD is part of every AArch64 CPU */
}
#else
static void probe(sinpe_cpu_info *info)
{
    memcpy(info->vendor, "unknown", 8);
}
#endif

const sinpe_cpu_info *sinpe_cpu(void)
{
    /* computed once; a race only computes the same answer twice */
    static sinpe_cpu_info info;
    static volatile int done;
    if (!done) {
        sinpe_cpu_info tmp;
        memset(&tmp, 0, sizeof tmp);
        probe(&tmp);
        info = tmp;
        done = 1;
    }
    return &info;
}

int sinpe_cpu_has_avx2_fma(void)
{
    return sinpe_cpu()->avx2;
}
