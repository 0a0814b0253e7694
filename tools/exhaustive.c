/* Exhaustive check of sinpe's built-in correctly rounded kernels.
 *
 * For every float32 bit pattern in the chosen range, compares sinpe_expf /
 * sinpe_sinf / sinpe_cosf (bits) with the correctly rounded value.  The
 * reference is independent of sinpe: glibc's double exp/sin/cos (error below
 * one double ulp) decides whenever both ends of d(1 +- 2^-50) round to the
 * same float; the remaining inputs (near a rounding boundary) go to MPFR at
 * precision 24 with the float exponent range and subnormalization.
 * NaN results match when both are NaN.  Specials are checked first.
 *
 * Usage: exhaustive FUNC [--kernel NAME] [--threads N] [--lo HEX] [--hi HEX] [--hard FILE]
 *   FUNC: exp, sin, cos; default range: all 2^32 patterns.
 *   --kernel NAME: check the block sin/cos of that code path (avx2, neon, ...:
 *   the path's table (src/paths/path.h), on blocks of inputs as the tables use
 *   it) instead of the scalar functions.
 *   --hard FILE: append the inputs that needed MPFR (hard cases) to FILE.
 * Exit status 0 when nothing differs.
 */
#define _GNU_SOURCE
#include <math.h>
#include <mpfr.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elem/crmath.h"
#include "paths/path.h"

typedef float (*kfun)(float);
typedef double (*dfun)(double);
typedef int (*mfun)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);

static kfun K;
static dfun D;
static mfun MF;
static uint64_t LO, HI;
static int NTHREADS = 2;
static const sinpe_path_ops *PATH; /* a vector path's block sin/cos, or NULL */
static const char *PATH_NAME = "scalar";
static int IS_SIN;
static FILE *HARD;
static pthread_mutex_t LOCK = PTHREAD_MUTEX_INITIALIZER;

typedef struct {
    int id;
    uint64_t checked, wrong, mpfr_calls, slow;
    uint32_t first_wrong[8];
} job;

static float asfloat(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t asu32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static float reference(float x, mpfr_t xm, mpfr_t rm, int *used_mpfr)
{
    double d = D((double)x);
    *used_mpfr = 0;
    if (isnan(d) || isinf(d) || d == 0.0)
        return (float)d;
    double e = fabs(d) * 0x1p-50;
    float a = (float)(d - e), b = (float)(d + e);
    if (a == b)
        return a;
    *used_mpfr = 1;
    mpfr_set_flt(xm, x, MPFR_RNDN);
    int inex = MF(rm, xm, MPFR_RNDN);
    inex = mpfr_subnormalize(rm, inex, MPFR_RNDN);
    return mpfr_get_flt(rm, MPFR_RNDN);
}

static void *worker(void *arg)
{
    job *j = arg;
    mpfr_t xm, rm;
    mpfr_init2(xm, 24);
    mpfr_init2(rm, 24);
    const uint64_t block = 1u << 16;
    static _Thread_local float xs[1 << 16], got[1 << 16], other[1 << 16];
    for (uint64_t b = LO + (uint64_t)j->id * block; b <= HI; b += (uint64_t)NTHREADS * block) {
        uint64_t end = b + block - 1 < HI ? b + block - 1 : HI;
        size_t n = (size_t)(end - b + 1);
        for (size_t i = 0; i < n; i++)
            xs[i] = asfloat((uint32_t)(b + i));
        if (PATH)
            PATH->sincos(xs, IS_SIN ? got : other, IS_SIN ? other : got, n);
        else
            for (size_t i = 0; i < n; i++)
                got[i] = K(xs[i]);
        for (size_t i = 0; i < n; i++) {
            uint64_t u = b + i;
            float x = xs[i];
            int used;
            float ref = reference(x, xm, rm, &used);
            j->checked++;
            j->mpfr_calls += (uint64_t)used;
            if (used && HARD) {
                pthread_mutex_lock(&LOCK);
                fprintf(HARD, "0x%08x\n", (uint32_t)u);
                pthread_mutex_unlock(&LOCK);
            }
            int same = (isnan(ref) && isnan(got[i])) || asu32(ref) == asu32(got[i]);
            if (!same) {
                if (j->wrong < 8)
                    j->first_wrong[j->wrong] = (uint32_t)u;
                j->wrong++;
            }
        }
    }
#ifdef SINPE_COUNT_SLOW
    j->slow = sinpe_exp_slow_count + sinpe_sincos_slow_count;
#endif
    mpfr_clear(xm);
    mpfr_clear(rm);
    mpfr_free_cache();
    return NULL;
}

static int check_specials(void)
{
    struct { float x; float e, s, c; } t[] = {
        { 0.0f, 1.0f, 0.0f, 1.0f },
        { -0.0f, 1.0f, -0.0f, 1.0f },
        { INFINITY, INFINITY, NAN, NAN },
        { -INFINITY, 0.0f, NAN, NAN },
        { NAN, NAN, NAN, NAN },
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        float got[3] = { sinpe_expf(t[i].x), sinpe_sinf(t[i].x), sinpe_cosf(t[i].x) };
        float want[3] = { t[i].e, t[i].s, t[i].c };
        for (int k = 0; k < 3; k++) {
            int ok = (isnan(want[k]) && isnan(got[k])) || asu32(want[k]) == asu32(got[k]);
            if (!ok) {
                printf("special: f%d(%a) = %a, want %a\n", k, t[i].x, got[k], want[k]);
                bad++;
            }
        }
    }
    return bad;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s exp|sin|cos [--threads N] [--lo HEX] [--hi HEX] [--hard FILE]\n", argv[0]);
        return 2;
    }
    if (!strcmp(argv[1], "exp")) { K = sinpe_expf; D = exp; MF = mpfr_exp; }
    else if (!strcmp(argv[1], "sin")) { K = sinpe_sinf; D = sin; MF = mpfr_sin; }
    else if (!strcmp(argv[1], "cos")) { K = sinpe_cosf; D = cos; MF = mpfr_cos; }
    else { fprintf(stderr, "unknown function %s\n", argv[1]); return 2; }
    LO = 0;
    HI = 0xffffffffu;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) NTHREADS = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--kernel")) {
            PATH_NAME = argv[i + 1];
            int found = 0;
            for (int p = 0; p < sinpe_paths_count(); p++)
                if (!strcmp(PATH_NAME, sinpe_paths_name(p))) {
                    found = 1;
                    PATH = p == 0 ? NULL : sinpe_paths_get(p); /* 0: the scalar kernels */
                    if (p != 0 && !PATH) {
                        fprintf(stderr, "--kernel %s: not built in or not supported by this CPU\n", PATH_NAME);
                        return 2;
                    }
                }
            if (!found) { fprintf(stderr, "unknown kernel %s\n", PATH_NAME); return 2; }
        }
        else if (!strcmp(argv[i], "--lo")) LO = strtoull(argv[i + 1], NULL, 16);
        else if (!strcmp(argv[i], "--hi")) HI = strtoull(argv[i + 1], NULL, 16);
        else if (!strcmp(argv[i], "--hard")) HARD = fopen(argv[i + 1], "a");
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    IS_SIN = K == sinpe_sinf;
    if (PATH && K == sinpe_expf) {
        fprintf(stderr, "--kernel %s: sin or cos only (exp has one path)\n", PATH_NAME);
        return 2;
    }
    if (NTHREADS < 1 || NTHREADS > 64 || LO > HI || HI > 0xffffffffu) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    mpfr_set_emin(-148);
    mpfr_set_emax(128);
    int bad = check_specials();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    job jobs[64];
    pthread_t th[64];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].id = i;
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    uint64_t checked = 0, wrong = 0, mp = 0, slow = 0;
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        checked += jobs[i].checked;
        wrong += jobs[i].wrong;
        mp += jobs[i].mpfr_calls;
        slow += jobs[i].slow;
        for (uint64_t k = 0; k < jobs[i].wrong && k < 8; k++) {
            float x = asfloat(jobs[i].first_wrong[k]);
            printf("wrong: %s(%a) [0x%08x]; scalar kernel gives %a\n", argv[1], x, jobs[i].first_wrong[k], K(x));
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("%s [%s]: range 0x%08llx..0x%08llx: %llu inputs checked, %llu wrong, "
           "%llu sent to MPFR, %llu sinpe slow paths, specials wrong %d, %.1f s, %d threads\n",
           argv[1], PATH_NAME, (unsigned long long)LO, (unsigned long long)HI, (unsigned long long)checked,
           (unsigned long long)wrong, (unsigned long long)mp, (unsigned long long)slow, bad, secs,
           NTHREADS);
    if (HARD)
        fclose(HARD);
    return (wrong || bad) ? 1 : 0;
}
