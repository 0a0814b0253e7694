/* A minimal parallel-for over [0, n) (platform layer, pure C). */
#ifndef SINPE_PLATFORM_THREADS_H
#define SINPE_PLATFORM_THREADS_H

#include <stdint.h>

/* The most threads a parallel-for runs (the public SINPE_MAX_THREADS). */
#define SINPE_THREADS_MAX 256

/* The number of chunks sinpe_parallel_for uses for these arguments. */
int sinpe_parallel_count(int64_t n, int64_t min_chunk, int threads);

/* fn(ctx, begin, end, tid) on contiguous grains of [0, n), tid < threads (at most SINPE_THREADS_MAX); a
 * thread (tid) may get several grains, one after another.  Runs on up to
 * `threads` threads (the caller's among them), fewer when n / min_chunk is
 * smaller; the work of a thread that cannot be started is taken by the others.
 * Returns the number of threads used. */
typedef void (*sinpe_task_fn)(void *ctx, int64_t begin, int64_t end, int tid);
int sinpe_parallel_for(int64_t n, int64_t min_chunk, int threads, sinpe_task_fn fn, void *ctx);

/* Parallel work from now on on an OpenMP runtime this process has already loaded (GNU
 * libgomp's GOMP_parallel, found by the library's file name or path as dlopen takes it; a
 * runtime is never loaded here), or, for NULL, on sinpe's own threads again.  0 on success;
 * -1 when the library is not loaded, lacks the entry points, or another runtime was adopted
 * before in this process; always -1 on Windows.  A forked child is back on sinpe's threads. */
int sinpe_threads_adopt_openmp(const char *library);
/* 1 while an OpenMP runtime is adopted: handing work to its (spinning) workers costs about a
 * microsecond, where waking a helper of sinpe's pool costs several. */
int sinpe_threads_openmp(void);

#endif
