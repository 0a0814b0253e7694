/* Memory facts of the platform (platform/memory.h). */
#include "platform/memory.h"

#include <stdint.h>

#if defined(_WIN32)
#include <windows.h>
#else
#include <unistd.h>
#endif
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)

/* Asked of the OS once per process (sysconf costs a system call, about 0.7 us, which the
 * memory rule of every call would pay); 0 when unknown.  A race asks twice. */
static int64_t ask_physical_memory(void);

int64_t sinpe_physical_memory(void)
{
    static volatile int64_t known = -1;
    int64_t v = known;
    if (v < 0)
        known = v = ask_physical_memory();
    return v;
}

static int64_t ask_physical_memory(void)
{
#if defined(_WIN32)
    MEMORYSTATUSEX m;
    m.dwLength = sizeof m;
    return GlobalMemoryStatusEx(&m) ? (int64_t)m.ullTotalPhys : 0;
#elif defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (int64_t)pages * (int64_t)size : 0;
#else
    return 0;
#endif
}

int sinpe_fresh_memory(void *data, int64_t bytes, int huge)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (!huge || bytes < (int64_t)(2 * HUGE_PAGE))
        return 0;
    /* the 2 MiB-aligned part of the buffer (transparent huge pages cover aligned spans) */
    uintptr_t lo = ((uintptr_t)data + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)data + (uintptr_t)bytes) & ~(HUGE_PAGE - 1);
    if (hi <= lo)
        return 0;
    return madvise((void *)lo, hi - lo, MADV_HUGEPAGE) == 0;
#else
    (void)data;
    (void)bytes;
    (void)huge;
    return 0;
#endif
}
