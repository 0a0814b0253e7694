/* A minimal parallel-for over [0, n) (internal, pure C). */
#ifndef SINPE_THREADS_H
#define SINPE_THREADS_H

#include <stdint.h>

#include "sinpe_core.h" /* SINPE_MAX_THREADS */

/* The number of chunks sinpe_parallel_for uses for these arguments. */
int sinpe_parallel_count(int64_t n, int64_t min_chunk, int threads);

/* fn(ctx, begin, end, tid) on contiguous grains of [0, n), tid < threads; a
 * thread (tid) may get several grains, one after another.  Runs on up to
 * `threads` threads (the caller's among them), fewer when n / min_chunk is
 * smaller; the work of a thread that cannot be started is taken by the others.
 * Returns the number of threads used. */
typedef void (*sinpe_task_fn)(void *ctx, int64_t begin, int64_t end, int tid);
int sinpe_parallel_for(int64_t n, int64_t min_chunk, int threads, sinpe_task_fn fn, void *ctx);

#endif
