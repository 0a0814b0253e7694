/* Parallel-for on POSIX threads or Win32 threads: one short-lived thread per
 * extra chunk (the calls it serves are large: see min_chunk). */
#include "sinpe_threads.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <pthread.h>
#endif

typedef struct {
    sinpe_task_fn fn;
    void *ctx;
    int64_t begin, end;
    int tid;
} chunk;

#ifdef _WIN32
static DWORD WINAPI run_chunk(LPVOID p)
#else
static void *run_chunk(void *p)
#endif
{
    chunk *c = p;
    c->fn(c->ctx, c->begin, c->end, c->tid);
    return 0;
}

int sinpe_parallel_count(int64_t n, int64_t min_chunk, int threads)
{
    if (n <= 0)
        return 0;
    if (min_chunk < 1)
        min_chunk = 1;
    int64_t t = threads < 1 ? 1 : threads > SINPE_MAX_THREADS ? SINPE_MAX_THREADS : threads;
    if (t > n / min_chunk)
        t = n / min_chunk > 0 ? n / min_chunk : 1;
    return (int)t;
}

int sinpe_parallel_for(int64_t n, int64_t min_chunk, int threads, sinpe_task_fn fn, void *ctx)
{
    int64_t t = sinpe_parallel_count(n, min_chunk, threads);
    if (t == 0)
        return 0;
    chunk ch[SINPE_MAX_THREADS];
#ifdef _WIN32
    HANDLE th[SINPE_MAX_THREADS];
#else
    pthread_t th[SINPE_MAX_THREADS];
#endif
    int started[SINPE_MAX_THREADS];
    for (int64_t i = 0; i < t; i++) {
        ch[i].fn = fn;
        ch[i].ctx = ctx;
        /* chunk sizes differ by at most one; no product that could overflow */
        int64_t q = n / t, r = n % t;
        ch[i].begin = q * i + (i < r ? i : r);
        ch[i].end = ch[i].begin + q + (i < r ? 1 : 0);
        ch[i].tid = (int)i;
        started[i] = 0;
    }
    for (int64_t i = 1; i < t; i++) {
#ifdef _WIN32
        th[i] = CreateThread(NULL, 0, run_chunk, &ch[i], 0, NULL);
        started[i] = th[i] != NULL;
#else
        started[i] = pthread_create(&th[i], NULL, run_chunk, &ch[i]) == 0;
#endif
    }
    run_chunk(&ch[0]);
    for (int64_t i = 1; i < t; i++) {
        if (started[i]) {
#ifdef _WIN32
            WaitForSingleObject(th[i], INFINITE);
            CloseHandle(th[i]);
#else
            pthread_join(th[i], NULL);
#endif
        } else {
            run_chunk(&ch[i]);
        }
    }
    return (int)t;
}
