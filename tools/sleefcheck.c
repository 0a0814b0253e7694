/* Exhaustive check of the 'sleef' backend's functions (src/sinpe_sleef.c) against the real
 * SLEEF library, opened with dlopen (argument --lib, default Debian's libsleef 3.5.1,
 * /usr/lib/x86_64-linux-gnu/libsleef.so.3 from apt-get install libsleef3): its x86 FMA
 * builds compute what torch on 64-bit Arm computes (docs/numerics.md).  Either library:
 *   Debian's libsleef: Sleef_*f4_*avx2128 (4 lanes, --width 4) or Sleef_*f8_*avx2;
 *   torch's libtorch_cpu.so, which exports SLEEF's Sleef_*f8_*avx2 and Sleef_*f16_*avx512f
 *   (--width 16), the sources torch's aarch64 wheels use.
 * A 4-lane vector is copied into every quarter of a wider one, which then takes the path
 * the 4-lane vector takes (SLEEF decides per vector, lanes are otherwise independent).
 *
 * For every float32 bit pattern x (or every STEP-th), each reduction path separately:
 *   natural  4 patterns per vector (consecutive ones always share a path: the path
 *            boundaries are multiples of 16), the vector on the largest path its lanes
 *            need;
 *   forced   x in lane 0 and a filler in the other lanes that forces the whole vector onto
 *            a longer path (u10: 1000 -> path B; u35: 125 -> B, 39000 -> C), as torch's
 *            vectors do when one element is large;
 * and compares the bits (NaN bits too) with sinpe_sleef_sincos on the same path.
 *
 * Usage: sleefcheck sin|cos|exp u10|u35 [--threads N] [--step S] [--lib PATH] [--width 4|8|16]
 * Build: make -C tools sleefcheck (no SLEEF headers needed).  Exit status 0 when nothing
 * differs.
 */
#include <dlfcn.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elem/sleef.h"

typedef __m128 (*fn4)(__m128);
typedef __m256 (*fn8)(__m256);
typedef __m512 (*fn16)(__m512);

static int FUNC, TRIG, NTHREADS = 2, WIDTH = 8;
static uint64_t STEP = 1;
static void *ORACLE;

__attribute__((target("avx2"))) static void call8(const float *in, float *out)
{
    _mm256_storeu_ps(out, ((fn8)ORACLE)(_mm256_loadu_ps(in)));
}

__attribute__((target("avx512f"))) static void call16(const float *in, float *out)
{
    _mm512_storeu_ps(out, ((fn16)ORACLE)(_mm512_loadu_ps(in)));
}

/* The oracle on one 4-lane vector: v copied into every quarter of the library's vector. */
static void oracle4(const float *v, float *r)
{
    float in[16], out[16];
    if (WIDTH == 4) {
        _mm_storeu_ps(r, ((fn4)ORACLE)(_mm_loadu_ps(v)));
        return;
    }
    for (int q = 0; q < WIDTH; q += 4)
        memcpy(in + q, v, 4 * sizeof(float));
    if (WIDTH == 8)
        call8(in, out);
    else
        call16(in, out);
    memcpy(r, out, 4 * sizeof(float));
}
static const float FILL[2][3] = { { 0, 1000.0f, 0 }, { 0, 125.0f, 39000.0f } }; /* by trig, path */

typedef struct {
    int id;
    uint64_t checked[3], wrong[3], nanbits[3];
    uint32_t first_wrong[3];
} job;

static float asfloat(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t asu32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static float model(float x, int path)
{
    if (FUNC == 0)
        return sinpe_sleef_expf(x);
    float s, c;
    sinpe_sleef_sincos((sinpe_sleef_trig)TRIG, path, &x, &s, &c, 1);
    return FUNC == 1 ? s : c;
}

static void count(job *j, int kind, float got, float want, uint32_t u)
{
    j->checked[kind]++;
    if (asu32(got) == asu32(want))
        return;
    if (got != got && want != want) {
        j->nanbits[kind]++;
        return;
    }
    if (!j->wrong[kind])
        j->first_wrong[kind] = u;
    j->wrong[kind]++;
}

static void *worker(void *arg)
{
    job *j = arg;
    int paths = FUNC == 0 ? 1 : TRIG == SINPE_SLEEF_U35 ? 3 : 2;
    uint64_t block = (uint64_t)1 << 16;
    for (uint64_t b = (uint64_t)j->id * block * STEP; b <= 0xffffffffull; b += (uint64_t)NTHREADS * block * STEP) {
        for (uint64_t i = 0; i < block; i += 4) {
            float xs[4], r[4];
            for (int l = 0; l < 4; l++)
                xs[l] = asfloat((uint32_t)(b + (i + (uint64_t)l) * STEP));
            oracle4(xs, r);
            int pv = 0; /* natural: the vector's path, the largest its lanes need */
            for (int l = 0; FUNC != 0 && l < 4; l++) {
                int p = sinpe_sleef_path((sinpe_sleef_trig)TRIG, xs[l]);
                pv = p > pv ? p : pv;
            }
            for (int l = 0; l < 4; l++)
                count(j, 0, model(xs[l], pv), r[l], asu32(xs[l]));
            for (int p = 1; p < paths; p++) /* forced onto path p by the other lanes */
                for (int l = 0; l < 4; l++) {
                    float v[4] = { xs[l], FILL[TRIG][p], FILL[TRIG][p], FILL[TRIG][p] };
                    oracle4(v, r);
                    int own = sinpe_sleef_path((sinpe_sleef_trig)TRIG, xs[l]);
                    count(j, p, model(xs[l], own > p ? own : p), r[0], asu32(xs[l]));
                }
            if (b + (i + 4) * STEP > 0xffffffffull)
                break;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s sin|cos|exp u10|u35 [--threads N] [--step S] [--lib PATH] "
                "[--width 4|8|16]\n", argv[0]);
        return 2;
    }
    const char *lib = "/usr/lib/x86_64-linux-gnu/libsleef.so.3";
    FUNC = !strcmp(argv[1], "exp") ? 0 : !strcmp(argv[1], "sin") ? 1 : !strcmp(argv[1], "cos") ? 2 : -1;
    TRIG = !strcmp(argv[2], "u10") ? SINPE_SLEEF_U10 : !strcmp(argv[2], "u35") ? SINPE_SLEEF_U35 : -1;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) NTHREADS = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--step")) STEP = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--lib")) lib = argv[i + 1];
        else if (!strcmp(argv[i], "--width")) WIDTH = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (FUNC < 0 || TRIG < 0 || (FUNC == 0 && TRIG != SINPE_SLEEF_U10) || NTHREADS < 1 ||
        NTHREADS > 64 || STEP < 1 || (WIDTH != 4 && WIDTH != 8 && WIDTH != 16)) {
        fprintf(stderr, "bad arguments (exp is u10 only; width 4, 8 or 16)\n");
        return 2;
    }
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")
        || (WIDTH == 16 && !__builtin_cpu_supports("avx512f"))) {
        fprintf(stderr, "this CPU cannot run SLEEF's %d-lane x86 functions\n", WIDTH);
        return 2;
    }
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "cannot open %s: %s\n", lib, dlerror());
        return 2;
    }
    char name[64];
    snprintf(name, sizeof name, WIDTH == 4 ? "Sleef_%sf4_%savx2128" : WIDTH == 8 ? "Sleef_%sf8_%savx2"
                                                                                : "Sleef_%sf16_%savx512f",
             argv[1], argv[2]);
    ORACLE = dlsym(h, name);
    if (!ORACLE) {
        fprintf(stderr, "%s does not export %s\n", lib, name);
        return 2;
    }
    printf("oracle: %s from %s\n", name, lib);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    job jobs[64];
    pthread_t th[64];
    for (int i = 0; i < NTHREADS; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].id = i;
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    uint64_t checked[3] = { 0 }, wrong[3] = { 0 }, nanbits[3] = { 0 };
    uint32_t first[3] = { 0 };
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(th[i], NULL);
        for (int k = 0; k < 3; k++) {
            if (jobs[i].wrong[k] && !wrong[k])
                first[k] = jobs[i].first_wrong[k];
            checked[k] += jobs[i].checked[k];
            wrong[k] += jobs[i].wrong[k];
            nanbits[k] += jobs[i].nanbits[k];
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    static const char *kind[2][3] = { { "natural", "forced path B (1000)", "" },
                                      { "natural", "forced path B (125)", "forced path C (39000)" } };
    uint64_t bad = 0;
    for (int k = 0; k < 3; k++) {
        if (!checked[k])
            continue;
        printf("%s %s %s: %llu inputs, %llu wrong, %llu NaN-bit differences", argv[1], argv[2],
               kind[TRIG][k], (unsigned long long)checked[k], (unsigned long long)wrong[k],
               (unsigned long long)nanbits[k]);
        if (wrong[k])
            printf(" (first: 0x%08x)", first[k]);
        printf("\n");
        bad += wrong[k] + nanbits[k];
    }
    printf("%.1f s, %d threads, every %llu-th pattern\n", secs, NTHREADS, (unsigned long long)STEP);
    return bad ? 1 : 0;
}
