/* Fresh output memory (sinpe_core.h: sinpe_fresh_memory). */
#include "sinpe_core.h"

#include <stdint.h>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)

int sinpe_fresh_memory(void *data, int64_t bytes, int how)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (how == SINPE_FRESH_PLAIN || bytes < (int64_t)(2 * HUGE_PAGE))
        return 0;
    /* the 2 MiB-aligned part of the buffer (transparent huge pages cover aligned spans) */
    uintptr_t lo = ((uintptr_t)data + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)data + (uintptr_t)bytes) & ~(HUGE_PAGE - 1);
    if (hi <= lo)
        return 0;
    if (how == SINPE_FRESH_HUGE)
        return madvise((void *)lo, hi - lo, MADV_HUGEPAGE) == 0;
    return 0;
#else
    (void)data;
    (void)bytes;
    (void)how;
    return 0;
#endif
}
