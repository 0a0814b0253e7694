/* Parallel-for on POSIX threads or Win32 threads: short-lived threads (the calls
 * it serves are large: see min_chunk), sharing the items grain by grain. */
#include "platform/threads.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <pthread.h>
#endif

/* The items are handed out in grains from a shared counter, so that a thread that
 * runs slower (a core shared with another process's spinning workers: torch's
 * OpenMP threads right after a parallel region) does less of the work instead of
 * holding the others up; the bits never depend on which thread runs an item. */
#if defined(_MSC_VER)
#include <intrin.h>
static int64_t fetch_add(volatile int64_t *p, int64_t v)
{
    return _InterlockedExchangeAdd64((volatile __int64 *)p, v);
}
#else
static int64_t fetch_add(volatile int64_t *p, int64_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
#endif

/* Grains per thread: enough to even out a slow thread, few enough that each
 * grain stays long (items are large: see the callers' min_chunk). */
#define GRAINS_PER_THREAD 8

typedef struct {
    sinpe_task_fn fn;
    void *ctx;
    int64_t n, grain;
    volatile int64_t next;
} shared;

typedef struct {
    shared *sh;
    int tid;
} worker;

#ifdef _WIN32
static DWORD WINAPI run_worker(LPVOID p)
#else
static void *run_worker(void *p)
#endif
{
    worker *w = p;
    shared *sh = w->sh;
    for (;;) {
        int64_t b = fetch_add(&sh->next, sh->grain);
        if (b >= sh->n)
            break;
        sh->fn(sh->ctx, b, sh->n - b < sh->grain ? sh->n : b + sh->grain, w->tid);
    }
    return 0;
}

int sinpe_parallel_count(int64_t n, int64_t min_chunk, int threads)
{
    if (n <= 0)
        return 0;
    if (min_chunk < 1)
        min_chunk = 1;
    int64_t t = threads < 1 ? 1 : threads > SINPE_THREADS_MAX ? SINPE_THREADS_MAX : threads;
    if (t > n / min_chunk)
        t = n / min_chunk > 0 ? n / min_chunk : 1;
    return (int)t;
}

int sinpe_parallel_for(int64_t n, int64_t min_chunk, int threads, sinpe_task_fn fn, void *ctx)
{
    int64_t t = sinpe_parallel_count(n, min_chunk, threads);
    if (t == 0)
        return 0;
    if (t == 1) {
        fn(ctx, 0, n, 0);
        return 1;
    }
    shared sh;
    sh.fn = fn;
    sh.ctx = ctx;
    sh.n = n;
    sh.grain = n / (t * GRAINS_PER_THREAD) > 0 ? n / (t * GRAINS_PER_THREAD) : 1;
    sh.next = 0;
    worker w[SINPE_THREADS_MAX];
#ifdef _WIN32
    HANDLE th[SINPE_THREADS_MAX];
#else
    pthread_t th[SINPE_THREADS_MAX];
#endif
    int started[SINPE_THREADS_MAX];
    for (int64_t i = 0; i < t; i++) {
        w[i].sh = &sh;
        w[i].tid = (int)i;
        started[i] = 0;
    }
    for (int64_t i = 1; i < t; i++) {
#ifdef _WIN32
        th[i] = CreateThread(NULL, 0, run_worker, &w[i], 0, NULL);
        started[i] = th[i] != NULL;
#else
        started[i] = pthread_create(&th[i], NULL, run_worker, &w[i]) == 0;
#endif
    }
    run_worker(&w[0]); /* the caller takes what threads that could not start leave */
    for (int64_t i = 1; i < t; i++) {
        if (started[i]) {
#ifdef _WIN32
            WaitForSingleObject(th[i], INFINITE);
            CloseHandle(th[i]);
#else
            pthread_join(th[i], NULL);
#endif
        }
    }
    return (int)t;
}
