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

#endif
