/* Memory facts of the platform (platform layer, pure C); the public API (sinpe.h) declares
 * the same two functions. */
#ifndef SINPE_PLATFORM_MEMORY_H
#define SINPE_PLATFORM_MEMORY_H

#include <stdint.h>

/* Physical memory of this machine in bytes, 0 when unknown. */
int64_t sinpe_physical_memory(void);

/* A freshly allocated output of `bytes` bytes at data, before anything touches it: with
 * huge = 1, its 2 MiB-aligned part is advised to use transparent huge pages (Linux madvise
 * MADV_HUGEPAGE), so that the threads filling it take one page fault per 2 MiB instead of
 * per 4 KiB.  Returns 1 when the advice was taken. */
int sinpe_fresh_memory(void *data, int64_t bytes, int huge);

#endif
