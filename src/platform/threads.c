/* Parallel-for on POSIX threads or Win32 threads, sharing the items grain by grain.  On POSIX
 * the helpers are a persistent pool, started on first use and woken per call (a few
 * microseconds, where starting a thread costs tens); a forked child starts a fresh pool, and
 * the pool is joined at exit.  A call made while another thread's call holds the pool, and
 * every call on Windows, starts short-lived threads as before.
 *
 * Or, once adopted (sinpe_threads_adopt_openmp), on an OpenMP runtime the process has
 * already loaded: GNU libgomp's GOMP_parallel, the entry point its `omp parallel` regions
 * compile to.  Work handed to the runtime another library's parallel loops run on (torch's)
 * lands on that library's worker threads, which spin for a while after each of its regions:
 * on a machine with as many cores as threads, a second pool's helper would share a core with
 * such a spinning worker and run at half speed or less. */
#include "platform/threads.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
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

/* Grains of sh for thread tid until none is left. */
static void take_grains(shared *sh, int tid)
{
    for (;;) {
        int64_t b = fetch_add(&sh->next, sh->grain);
        if (b >= sh->n)
            break;
        sh->fn(sh->ctx, b, sh->n - b < sh->grain ? sh->n : b + sh->grain, tid);
    }
}

#ifdef _WIN32
static DWORD WINAPI run_worker(LPVOID p)
#else
static void *run_worker(void *p)
#endif
{
    worker *w = p;
    take_grains(w->sh, w->tid);
    return 0;
}

#ifndef _WIN32
/* ---- the pool ------------------------------------------------------------------------- */

/* Rounds a helper polls for the next call before it sleeps (a pause each: some
 * microseconds), so that back-to-back calls need no system call. */
#define POOL_SPIN 256

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* A call's helpers join it under the lock until the caller, its own grains done, closes it;
 * the caller then waits for those that joined only, never for a helper still asleep (one
 * that wakes after the close finds nothing to do, and the call's grains live on the
 * caller's stack). */
typedef struct {
    pthread_mutex_t mu; /* guards everything below but gen's polling reads */
    pthread_cond_t wake, done;
    pthread_t th[SINPE_THREADS_MAX];
    int started;          /* helpers running: tids 1 .. started */
    int want;             /* helpers that may take part in the current call */
    uint64_t gen;         /* the current call's number */
    shared *sh;
    int closed;           /* the caller has closed the current call */
    int joined, finished; /* helpers of the current call that joined it, and left it */
    int stop;
} pool;

typedef struct {
    pool *pl;
    int tid;
} helper_arg;

static pool *the_pool;          /* NULL in a forked child until its first call */
static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER; /* one call at a time */
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
static helper_arg helper_args[SINPE_THREADS_MAX];

static void *pool_helper(void *p)
{
    const helper_arg *a = p;
    pool *pl = a->pl;
    uint64_t seen = 0;
    pthread_mutex_lock(&pl->mu);
    for (;;) {
        while (!pl->stop && (pl->gen == seen || pl->closed || a->tid > pl->want)) {
            seen = pl->gen; /* a call this helper takes no part in (closed, or not its tid) */
            pthread_mutex_unlock(&pl->mu);
            for (int i = 0; i < POOL_SPIN && __atomic_load_n(&pl->gen, __ATOMIC_RELAXED) == seen;
                 i++)
                cpu_relax();
            pthread_mutex_lock(&pl->mu);
            if (pl->gen == seen && !pl->stop)
                pthread_cond_wait(&pl->wake, &pl->mu);
        }
        if (pl->stop) {
            pthread_mutex_unlock(&pl->mu);
            return NULL;
        }
        seen = pl->gen;
        shared *sh = pl->sh;
        pl->joined++;
        pthread_mutex_unlock(&pl->mu);
        take_grains(sh, a->tid);
        pthread_mutex_lock(&pl->mu);
        if (++pl->finished == pl->joined && pl->closed)
            pthread_cond_signal(&pl->done);
    }
}

/* The helpers are joined at exit (unless a call is running then: a thread of the process may
 * still be in one). */
static void pool_shutdown(void)
{
    if (pthread_mutex_trylock(&pool_busy) != 0)
        return;
    pool *pl = the_pool;
    if (pl) {
        pthread_mutex_lock(&pl->mu);
        pl->stop = 1;
        pthread_cond_broadcast(&pl->wake);
        pthread_mutex_unlock(&pl->mu);
        for (int i = 1; i <= pl->started; i++)
            pthread_join(pl->th[i], NULL);
        pthread_cond_destroy(&pl->wake);
        pthread_cond_destroy(&pl->done);
        pthread_mutex_destroy(&pl->mu);
        free(pl);
        the_pool = NULL;
    }
    pthread_mutex_unlock(&pool_busy);
}

/* A forked child has none of the parent's helpers: it starts its own pool (the parent's
 * memory is left as it is; a call running in another parent thread may have held the lock). */
static void omp_forget(void);

static void pool_forked(void)
{
    the_pool = NULL;
    pthread_mutex_init(&pool_busy, NULL);
    omp_forget(); /* libgomp's pool is not fork-safe: its workers are gone in the child */
}

static void pool_register(void)
{
    pthread_atfork(NULL, NULL, pool_forked);
    atexit(pool_shutdown);
}

/* The pool with at least `helpers` helpers started, or as many as could be; NULL when none
 * can be made.  Called with pool_busy held. */
static pool *pool_get(int helpers)
{
    pthread_once(&pool_once, pool_register);
    pool *pl = the_pool;
    if (!pl) {
        pl = calloc(1, sizeof *pl);
        if (!pl)
            return NULL;
        if (pthread_mutex_init(&pl->mu, NULL) != 0) {
            free(pl);
            return NULL;
        }
        if (pthread_cond_init(&pl->wake, NULL) != 0) {
            pthread_mutex_destroy(&pl->mu);
            free(pl);
            return NULL;
        }
        if (pthread_cond_init(&pl->done, NULL) != 0) {
            pthread_cond_destroy(&pl->wake);
            pthread_mutex_destroy(&pl->mu);
            free(pl);
            return NULL;
        }
        the_pool = pl;
    }
    while (pl->started < helpers) {
        helper_arg *a = &helper_args[pl->started + 1];
        a->pl = pl;
        a->tid = pl->started + 1;
        if (pthread_create(&pl->th[a->tid], NULL, pool_helper, a) != 0)
            break;
        pl->started++;
    }
    return pl;
}

/* sh run by the caller (tid 0) and helpers 1 .. t - 1 of the pool; 0 when the pool is taken
 * by another call or has no helper (the caller then does it otherwise). */
static int pool_run(shared *sh, int t)
{
    if (pthread_mutex_trylock(&pool_busy) != 0)
        return 0;
    pool *pl = pool_get(t - 1);
    int helpers = pl ? (pl->started < t - 1 ? pl->started : t - 1) : 0;
    if (helpers == 0) {
        pthread_mutex_unlock(&pool_busy);
        return 0;
    }
    pthread_mutex_lock(&pl->mu);
    pl->sh = sh;
    pl->want = helpers;
    pl->closed = 0;
    pl->joined = pl->finished = 0;
    __atomic_store_n(&pl->gen, pl->gen + 1, __ATOMIC_RELAXED);
    pthread_cond_broadcast(&pl->wake);
    pthread_mutex_unlock(&pl->mu);
    take_grains(sh, 0);
    pthread_mutex_lock(&pl->mu);
    pl->closed = 1;
    while (pl->finished < pl->joined)
        pthread_cond_wait(&pl->done, &pl->mu);
    pthread_mutex_unlock(&pl->mu);
    pthread_mutex_unlock(&pool_busy);
    return 1;
}

/* ---- an OpenMP runtime already in the process --------------------------------------------- */

typedef void (*omp_parallel_fn)(void (*fn)(void *), void *data, unsigned threads,
                                unsigned flags);
typedef struct {
    omp_parallel_fn parallel; /* GOMP_parallel */
    int (*thread_num)(void);  /* omp_get_thread_num */
} omp_runtime;

static omp_runtime omp_found;        /* filled once, before it is published */
static omp_runtime *omp_rt;          /* the adopted runtime, NULL: sinpe's own threads */
static pthread_mutex_t omp_lock = PTHREAD_MUTEX_INITIALIZER;

static void omp_forget(void)
{
    __atomic_store_n(&omp_rt, NULL, __ATOMIC_RELEASE);
}

int sinpe_threads_adopt_openmp(const char *library)
{
    pthread_once(&pool_once, pool_register); /* the fork handler that forgets it */
    if (!library) {
        omp_forget();
        return 0;
    }
    /* only a library already loaded (never a second runtime loaded by sinpe); the handle is
     * kept, so the library stays while it may be used */
    void *h = dlopen(library, RTLD_NOLOAD | RTLD_LAZY);
    if (!h)
        return -1;
    omp_parallel_fn par = (omp_parallel_fn)dlsym(h, "GOMP_parallel");
    int (*num)(void) = (int (*)(void))dlsym(h, "omp_get_thread_num");
    if (!par || !num) {
        dlclose(h);
        return -1;
    }
    pthread_mutex_lock(&omp_lock);
    int same = omp_found.parallel == par;
    if (!omp_found.parallel) { /* the first runtime adopted stays the one (filled once) */
        omp_found.parallel = par;
        omp_found.thread_num = num;
        same = 1;
    }
    if (same)
        __atomic_store_n(&omp_rt, &omp_found, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&omp_lock);
    if (!same)
        dlclose(h);
    return same ? 0 : -1;
}

int sinpe_threads_openmp(void)
{
    return __atomic_load_n(&omp_rt, __ATOMIC_ACQUIRE) != NULL;
}

typedef struct {
    shared *sh;
    const omp_runtime *rt;
} omp_call;

static void omp_body(void *p)
{
    const omp_call *c = p;
    take_grains(c->sh, c->rt->thread_num());
}

/* sh on t threads of the adopted runtime's team (the caller is its thread 0; a team may come
 * out smaller, nested or capped: the grains are shared all the same); 0 when none is adopted */
static int omp_run(shared *sh, int t)
{
    const omp_runtime *rt = __atomic_load_n(&omp_rt, __ATOMIC_ACQUIRE);
    if (!rt)
        return 0;
    omp_call c = { sh, rt };
    rt->parallel(omp_body, &c, (unsigned)t, 0);
    return 1;
}
#else
int sinpe_threads_adopt_openmp(const char *library)
{
    return library ? -1 : 0;
}

int sinpe_threads_openmp(void)
{
    return 0;
}
#endif

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
#ifndef _WIN32
    if (omp_run(&sh, (int)t) || pool_run(&sh, (int)t))
        return (int)t;
#endif
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
