/* C-level test driver of the sinpe core (no Python): good calls on every
 * path, jobs of every element type and odd layouts (strided, unaligned,
 * aliasing positions), the overlap decision, plans in steps, every error
 * path, the oneMKL loader's failure paths, and parallel work on an OpenMP runtime.  Run under valgrind and the
 * sanitizers by tests/c/test_c_core.py:
 *   cc -O1 -g -ffp-contract=off -Isrc -Isrc/include tests/c/test_core.c $(core sources) -lm -ldl -lpthread
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform/threads.h"
#include "sinpe.h"

#ifndef _WIN32
#include <dlfcn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#endif

static int failures, checks;
#define CHECK(cond)                                                                        \
    do {                                                                                   \
        checks++;                                                                          \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int same_bits(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

enum { L = 37, D = 24 };
static sinpe_opts SCALAR; /* the built-in kernels on the scalar path, one thread */

static sinpe_opts opts_of(const char *backend, int path, int threads)
{
    sinpe_opts o;
    sinpe_opts_init(&o);
    o.backend = sinpe_backend_find(backend);
    o.path = path;
    o.threads = threads;
    return o;
}

/* positions of one axis of n elements of a type, stride bytes apart */
static void use_positions(sinpe_job *j, const void *data, sinpe_type t, int64_t n, int64_t stride)
{
    j->pos.mode = SINPE_POS_ARRAY;
    j->pos.at.data = (void *)(uintptr_t)data;
    j->pos.at.type = t;
    j->pos.at.ndim = 1;
    j->pos.at.shape[0] = n;
    j->pos.at.strides[0] = stride;
}

static void good_calls(const float *t)
{
    static float u[L * D];
    sinpe_opts fast = opts_of("builtin", sinpe_path_best(), 3);
    CHECK(sinpe_table(u, L, D, 10000.0, &fast) == SINPE_OK);
    CHECK(same_bits(t, u, sizeof u));
    CHECK(t[0] == 0.0f && t[1] == 1.0f);

    /* positions of several types, and offsets: rows 5..8 */
    sinpe_job j;
    int64_t shape[2] = { 4, D };
    float pf[4] = { 5, 6, 7, 8 };
    int64_t pi[4] = { 5, 6, 7, 8 };
    uint8_t pu[4] = { 5, 6, 7, 8 };
    const void *pos[3] = { pf, pi, pu };
    sinpe_type pt[3] = { SINPE_F32, SINPE_I64, SINPE_U8 };
    int64_t ps[3] = { 4, 8, 1 };
    for (int k = 0; k < 3; k++) {
        memset(u, 0, sizeof u);
        sinpe_job_init(&j, u, 2, shape, 10000.0);
        use_positions(&j, pos[k], pt[k], 4, ps[k]);
        CHECK(sinpe_run(&j, &fast) == SINPE_OK);
        CHECK(same_bits(u, t + 5 * D, 4 * D * sizeof(float)));
    }
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    j.offset = 5;
    CHECK(sinpe_run(&j, &SCALAR) == SINPE_OK);
    CHECK(same_bits(u, t + 5 * D, 4 * D * sizeof(float)));

    /* add: 2 batch elements of rows 3..5 */
    float x[2 * 3 * D];
    for (int i = 0; i < 2 * 3 * D; i++)
        x[i] = 1.0f;
    CHECK(sinpe_add(x, 2, 3, D, 3 * D, D, 3, 10000.0, &fast) == SINPE_OK);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3 * D; i++)
            CHECK(x[b * 3 * D + i] == 1.0f + t[3 * D + i]);

    /* the SLEEF backend: a table in steps equals one run, torch's chunking on 3 threads */
    sinpe_opts sl = opts_of("sleef", 0, 2);
    sl.sleef.trig = 1; /* u35 */
    sl.sleef.lanes = 4;
    sl.sleef.torch_threads = 3;
    static float s1[L * D], s2[L * D];
    CHECK(sinpe_table(s1, L, D, 10000.0, &sl) == SINPE_OK);
    sl.threads = 1;
    CHECK(sinpe_table(s2, L, D, 10000.0, &sl) == SINPE_OK && same_bits(s1, s2, sizeof s1));
    CHECK(s1[0] == 0.0f && s1[1] == 1.0f);
    sinpe_job tj;
    int64_t tshape[2] = { 4, D };
    sinpe_job_init(&tj, s2, 2, tshape, 10000.0);
    tj.offset = 5;
    tj.table_rows = L; /* rows 5..8 of the L-row table: the same vectors */
    CHECK(sinpe_run(&tj, &sl) == SINPE_OK && same_bits(s2, s1 + 5 * D, 4 * D * sizeof(float)));
    tj.table_rows = 8; /* too short for rows 5..8 */
    CHECK(sinpe_run(&tj, &sl) == SINPE_E_TABLE);

    /* elementwise */
    float in[5] = { 0.0f, 1.0f, -2.5f, 1e30f, NAN }, out[5];
    CHECK(sinpe_map(SINPE_FN_SIN, in, out, 5, &SCALAR) == SINPE_OK);
    CHECK(out[0] == 0.0f && isnan(out[4]));
    CHECK(sinpe_map(SINPE_FN_EXP, in, out, 5, &fast) == SINPE_OK && out[0] == 1.0f);
}

/* Every element type, a transposed and an unaligned destination. */
static void types_and_layouts(const float *t)
{
    static const sinpe_type types[4] = { SINPE_F32, SINPE_F64, SINPE_F16, SINPE_BF16 };
    static unsigned char want[L * D * 8], got[L * D * 8 + 16];
    for (int k = 0; k < 4; k++) {
        int w = sinpe_type_size(types[k]);
        sinpe_round(t, want, L * D, types[k]);
        /* unaligned by 1 byte, contiguous */
        sinpe_job j;
        int64_t shape[2] = { L, D };
        sinpe_job_init(&j, got + 1, 2, shape, 10000.0);
        j.dst.type = types[k];
        j.dst.strides[0] = D * w;
        j.dst.strides[1] = w;
        CHECK(sinpe_run(&j, &SCALAR) == SINPE_OK);
        CHECK(same_bits(got + 1, want, (size_t)(L * D * w)));
        /* transposed: element (r, c) at (c * L + r) * w */
        memset(got, 0, sizeof got);
        j.dst.data = got;
        j.dst.strides[0] = w;
        j.dst.strides[1] = (int64_t)L * w;
        CHECK(sinpe_run(&j, &SCALAR) == SINPE_OK);
        int ok = 1;
        for (int r = 0; r < L; r++)
            for (int c = 0; c < D; c++)
                ok &= same_bits(got + ((size_t)c * L + r) * w, want + ((size_t)r * D + c) * w, (size_t)w);
        CHECK(ok);
    }
}

/* Positions stored inside the destination are read before it is written. */
static void aliasing_positions(const float *t)
{
    static float buf[4 * D];
    sinpe_job j;
    int64_t shape[2] = { 4, D };
    sinpe_job_init(&j, buf, 2, shape, 10000.0);
    use_positions(&j, buf + 2 * D, SINPE_F32, 4, 4); /* rows 2 and 3 hold the positions */
    for (int i = 0; i < 4; i++)
        buf[2 * D + i] = (float)(9 - i); /* positions 9, 8, 7, 6 */
    CHECK(sinpe_run(&j, &SCALAR) == SINPE_OK);
    for (int i = 0; i < 4; i++)
        CHECK(same_bits(buf + i * D, t + (9 - i) * D, D * sizeof(float)));
}

static int overlap(int n, const int64_t *shape, const int64_t *strides)
{
    sinpe_job j;
    static float mem[4096];
    int64_t full[3] = { 0, 0, 2 };
    sinpe_job_init(&j, mem, n + 1, full, 10000.0);
    j.kind = SINPE_JOB_ADD; /* any leading axes */
    for (int k = 0; k < n; k++) {
        j.dst.shape[k] = shape[k];
        j.dst.strides[k] = strides[k];
    }
    j.dst.shape[n] = 2;
    j.dst.strides[n] = 4;
    if (n == 1) { /* one row axis: the rows */
        j.dst.ndim = 3;
        memmove(j.dst.shape + 1, j.dst.shape, 2 * sizeof(int64_t));
        memmove(j.dst.strides + 1, j.dst.strides, 2 * sizeof(int64_t));
        j.dst.shape[0] = 1;
        j.dst.strides[0] = 0;
    }
    return sinpe_job_check(&j, &SCALAR);
}

static void overlaps(void)
{
    /* rows of 2 floats (8 bytes); (shape, byte strides) of the leading axes */
    CHECK(overlap(2, (int64_t[]){ 3, 4 }, (int64_t[]){ 0, 8 }) == SINPE_E_OVERLAP);    /* zero stride */
    CHECK(overlap(2, (int64_t[]){ 3, 4 }, (int64_t[]){ 8, 4 }) == SINPE_E_OVERLAP);    /* rows overlap */
    CHECK(overlap(2, (int64_t[]){ 3, 2 }, (int64_t[]){ 16, 24 }) == SINPE_OK);         /* interleaved */
    CHECK(overlap(2, (int64_t[]){ 3, 3 }, (int64_t[]){ 16, 24 }) == SINPE_OK);
    CHECK(overlap(2, (int64_t[]){ 4, 3 }, (int64_t[]){ 16, 24 }) == SINPE_E_OVERLAP);  /* 3*16 = 2*24 */
    CHECK(overlap(2, (int64_t[]){ 4, 3 }, (int64_t[]){ -8, 32 }) == SINPE_OK);
    CHECK(overlap(1, (int64_t[]){ 1 }, (int64_t[]){ 0 }) == SINPE_OK);                 /* one row */
    CHECK(overlap(2, (int64_t[]){ (int64_t)1 << 40, 1 }, (int64_t[]){ 0, 8 }) == SINPE_E_OVERLAP);
    CHECK(overlap(2, (int64_t[]){ 1000, 1000 }, (int64_t[]){ 8 * 1001, 8 * 999 }) == SINPE_OK);
    CHECK(overlap(2, (int64_t[]){ 1001, 1002 }, (int64_t[]){ 8 * 1001, 8 * 999 }) == SINPE_E_OVERLAP);
    CHECK(overlap(1, (int64_t[]){ 2 }, (int64_t[]){ 6 }) == SINPE_E_OVERLAP);          /* partial */
    CHECK(overlap(1, (int64_t[]){ (int64_t)1 << 62 }, (int64_t[]){ 8 }) == SINPE_E_SIZE);
}

/* A plan run in small steps gives the same bits as one run. */
static void steps(void)
{
    enum { SL = 3000, SD = 64 };
    float *u = malloc(sizeof(float) * SL * SD), *v = malloc(sizeof(float) * SL * SD);
    CHECK(u && v && sinpe_table(v, SL, SD, 10000.0, &SCALAR) == SINPE_OK);
    sinpe_job j;
    int64_t shape[2] = { SL, SD };
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    sinpe_opts o = opts_of("builtin", sinpe_path_best(), 2);
    sinpe_plan *p;
    CHECK(sinpe_plan_new(&j, &o, &p) == SINPE_OK);
    int done = 0, n = 0;
    while (!done && n < 10000) {
        CHECK(sinpe_plan_step(p, 1, &done) == SINPE_OK);
        n++;
    }
    sinpe_plan_free(p);
    CHECK(done && n > 10);
    CHECK(same_bits(u, v, sizeof(float) * SL * SD));
    sinpe_need need;
    sinpe_job_need(&j, &o, &need);
    CHECK(need.scratch > 0 && need.fresh == 0);
    free(u);
    free(v);
}

static void errors(void)
{
    float x[2 * 3 * D];
    for (int i = 0; i < 2 * 3 * D; i++)
        x[i] = 7.0f;
    const sinpe_opts *o = &SCALAR;
    CHECK(sinpe_table(x, 3, 7, 10000.0, o) == SINPE_E_DMODEL);
    CHECK(sinpe_table(x, 3, 0, 10000.0, o) == SINPE_E_DMODEL);
    CHECK(sinpe_table(x, -1, 8, 10000.0, o) == SINPE_E_ROWS);
    CHECK(sinpe_table(x, 3, 8, NAN, o) == SINPE_E_BASE);
    CHECK(sinpe_table(x, 3, 8, -1.0, o) == SINPE_E_BASE);
    CHECK(sinpe_table(x, 3, 8, INFINITY, o) == SINPE_E_BASE);
    CHECK(sinpe_table(x, (int64_t)1 << 62, 1024, 10000.0, o) == SINPE_E_SIZE);
    CHECK(sinpe_table(x, 0, (int64_t)1 << 62, 10000.0, o) == SINPE_E_SIZE);
    CHECK(sinpe_table(NULL, 3, 8, 10000.0, o) == SINPE_E_NULL);
    CHECK(sinpe_table(x, 3, 8, 10000.0, NULL) == SINPE_E_NULL);
    CHECK(sinpe_add(x, 1, 3, 8, 24, 8, -1, 10000.0, o) == SINPE_E_OFFSET);
    CHECK(sinpe_add(x, 1, 3, 8, 24, 8, INT64_MAX - 1, 10000.0, o) == SINPE_E_LASTPOS);
    CHECK(sinpe_add(x, -1, 3, 8, 24, 8, 0, 10000.0, o) == SINPE_E_ROWS);
    sinpe_opts bad_path = opts_of("builtin", 99, 1);
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_path) == SINPE_E_PATH);
    sinpe_opts bad_backend = opts_of("builtin", 0, 1);
    bad_backend.backend = sinpe_backend_count(); /* one past the last */
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_backend) == SINPE_E_BACKEND);
    sinpe_opts bad_threads = opts_of("builtin", 0, 0);
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_threads) == SINPE_E_THREADS);
    float in[1] = { 0 }, out[1];
    CHECK(sinpe_map((sinpe_func)7, in, out, 1, o) == SINPE_E_FUNC);
    sinpe_opts bad_sleef = opts_of("sleef", 0, 1);
    bad_sleef.sleef.lanes = 5;
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_sleef) == SINPE_E_BACKEND);
    bad_sleef.sleef.lanes = 4;
    bad_sleef.sleef.torch_threads = 0;
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_sleef) == SINPE_E_TORCH_THREADS);
    sinpe_job j;
    int64_t shape[2] = { 3, 8 };
    sinpe_job_init(&j, x, 2, shape, 10000.0);
    j.dst.type = SINPE_I32;
    CHECK(sinpe_run(&j, o) == SINPE_E_TYPE);
    j.dst.type = SINPE_F32;
    j.dst.ndim = 1;
    CHECK(sinpe_run(&j, o) == SINPE_E_SHAPE);
    j.kind = SINPE_JOB_ADD;
    CHECK(sinpe_run(&j, o) == SINPE_E_DIMS);
    j.kind = SINPE_JOB_TABLE;
    j.dst.ndim = 2;
    j.dst.strides[0] = 0; /* three rows on one */
    CHECK(sinpe_run(&j, o) == SINPE_E_OVERLAP);
    j.dst.strides[0] = 32;
    use_positions(&j, NULL, SINPE_F32, 3, 4);
    CHECK(sinpe_run(&j, o) == SINPE_E_NULL);
    j.pos.at.data = in;
    j.pos.at.type = (sinpe_type)77;
    CHECK(sinpe_run(&j, o) == SINPE_E_TYPE);
    j.pos.at.type = SINPE_F32;
    j.offset = 2;
    CHECK(sinpe_run(&j, o) == SINPE_E_BOTH);
    j.offset = 0;
    j.pos.at.shape[0] = 4;
    CHECK(sinpe_run(&j, o) == SINPE_E_SHAPE);
    j.pos.at.shape[0] = 3;
    j.dst.readonly = 1;
    CHECK(sinpe_run(&j, o) == SINPE_E_READONLY);
    j.dst.readonly = 0;
    j.want_type = SINPE_F16;
    CHECK(sinpe_run(&j, o) == SINPE_E_DTYPE);
    for (int i = 0; i < 2 * 3 * D; i++)
        CHECK(x[i] == 7.0f);

    /* oneMKL backends: not loaded, and load failures */
    const char *libs[2] = { "mkl", "torch" };
    for (int k = 0; k < 2; k++) {
        int b = sinpe_backend_find(libs[k]);
        CHECK(b > 0 && sinpe_backend_loadable(b));
        if (sinpe_backend_ready(b))
            continue;
        sinpe_opts vml = opts_of(libs[k], 0, 1);
        CHECK(sinpe_table(x, 3, 8, 10000.0, &vml) == SINPE_E_BACKEND);
        char msg[256];
        CHECK(sinpe_backend_load(b, "/nonexistent/libmkl_rt.so.2", msg, sizeof msg) == SINPE_E_LOAD);
        CHECK(strstr(msg, "dlopen failed") != NULL);
        CHECK(sinpe_backend_load(b, NULL, msg, sizeof msg) == SINPE_E_LOAD);
        CHECK(sinpe_backend_load(b, "libm.so.6", msg, sizeof msg) == SINPE_E_LOAD);
        CHECK(strstr(msg, "symbol not found") != NULL);
        CHECK(!sinpe_backend_ready(b) && sinpe_backend_version(b)[0] == 0);
    }
    CHECK(sinpe_backend_load(sinpe_backend_count(), "x", NULL, 0) == SINPE_E_LOAD
          && !sinpe_backend_ready(sinpe_backend_count()));
    CHECK(sinpe_backend_load(0, "x", NULL, 0) == SINPE_E_LOAD); /* builtin: nothing to load */
    CHECK(sinpe_backend_find("nonsense") == -1 && sinpe_backend_name(-1) == NULL);
    for (int s = 0; s <= SINPE_STATUS_COUNT; s++)
        CHECK(sinpe_strerror(s) != NULL);
}

/* The parallel-for: every item exactly once, for any n and thread count, and a slow
 * thread (here one that sleeps per grain, as one sharing its core with another
 * process's spinning workers would crawl) leaves the work to the others. */
typedef struct {
    int seen[200];
    int by_tid[SINPE_MAX_THREADS];
    int slow_tid;
} pf_ctx;

static void pf_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    pf_ctx *c = ctx;
    for (int64_t i = begin; i < end; i++) {
        __atomic_fetch_add(&c->seen[i], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->by_tid[tid], 1, __ATOMIC_RELAXED);
    }
#ifndef _WIN32
    if (tid == c->slow_tid) {
        struct timespec ts = { 0, 5000000 };
        nanosleep(&ts, NULL);
    }
#endif
}

static void parallel_for(void)
{
    for (int n = 0; n <= 200; n += n < 10 ? 1 : 37)
        for (int threads = 1; threads <= 4; threads++) {
            pf_ctx c;
            memset(&c, 0, sizeof c);
            c.slow_tid = -1;
            int used = sinpe_parallel_for(n, 3, threads, pf_task, &c);
            CHECK(used == sinpe_parallel_count(n, 3, threads) && used <= threads);
            int once = 1;
            for (int i = 0; i < n; i++)
                once &= c.seen[i] == 1;
            CHECK(once);
        }
    pf_ctx c;
    memset(&c, 0, sizeof c);
    c.slow_tid = 1;
    CHECK(sinpe_parallel_for(160, 1, 2, pf_task, &c) == 2);
    CHECK(c.by_tid[0] + c.by_tid[1] == 160);
#ifndef _WIN32
    CHECK(c.by_tid[1] < c.by_tid[0]); /* static halves would give 80 each */
#endif
}

/* The other job kinds through the same check and plans: MAP, FREQS, ROPE, a GRID preset,
 * and the memory rule for fresh results. */
static void job_kinds(void)
{
    sinpe_opts o = opts_of("builtin", sinpe_path_best(), 2);
    /* FREQS exp_mul: exp(k * a) * m, k = 2 * (i / 1) */
    sinpe_freq f = { SINPE_FREQ_EXP_MUL, 0, 2, 1, -0.25f, 1.0f, 1.0f, 1.0f, 1.0, 1.0, 0 };
    float fr[9], args[9], want[9];
    sinpe_job j;
    int64_t n9[1] = { 9 };
    sinpe_job_init(&j, fr, 1, n9, 0.0);
    j.kind = SINPE_JOB_FREQS;
    j.freq = &f;
    j.rows = 9;
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    for (int i = 0; i < 9; i++)
        args[i] = (float)(2 * i) * -0.25f;
    CHECK(sinpe_map(SINPE_FN_EXP, args, want, 9, &o) == SINPE_OK && same_bits(fr, want, sizeof fr));
    f.group = 0;
    CHECK(sinpe_run(&j, &o) == SINPE_E_PRESET);
    f.group = 1;
    j.dst.type = SINPE_F64; /* pow64 writes float64, the others float32 */
    CHECK(sinpe_run(&j, &o) == SINPE_E_TYPE);

    /* ROPE: cos 0, sin 1 turns (a, b) into (-b, a) for the halves, in steps */
    float x[2 * 5 * 8], x0[2 * 5 * 8], c[5 * 8], sn[5 * 8];
    for (int i = 0; i < 80; i++)
        x[i] = x0[i] = (float)i - 20.0f;
    for (int i = 0; i < 40; i++) {
        c[i] = 0.0f;
        sn[i] = 1.0f;
    }
    int64_t xs[3] = { 2, 5, 8 };
    sinpe_job_init(&j, x, 3, xs, 0.0);
    j.kind = SINPE_JOB_ROPE;
    j.rope.seq_axis = 1;
    j.rope.batch_axis = -1;
    int64_t ts[3] = { 1, 5, 8 };
    sinpe_job tj;
    sinpe_job_init(&tj, c, 3, ts, 0.0);
    j.rope.cos = tj.dst;
    tj.dst.data = sn;
    j.rope.sin = tj.dst;
    sinpe_plan *p;
    CHECK(sinpe_plan_new(&j, &o, &p) == SINPE_OK);
    int done = 0, steps = 0;
    while (p && !done && steps < 1000) {
        CHECK(sinpe_plan_step(p, 1, &done) == SINPE_OK);
        steps++;
    }
    sinpe_plan_free(p);
    int ok = done;
    for (int v = 0; v < 10; v++)
        for (int i = 0; i < 4; i++)
            ok &= x[v * 8 + i] == -x0[v * 8 + i + 4] && x[v * 8 + i + 4] == x0[v * 8 + i];
    CHECK(ok);
    j.rope.seq_axis = 2;
    CHECK(sinpe_run(&j, &o) == SINPE_E_AXIS);
    j.rope.seq_axis = 1;
    j.rope.cos.shape[2] = 6;
    j.rope.sin.shape[2] = 6;
    j.rope.cos.strides[1] = j.rope.sin.strides[1] = 24;
    j.rope.cos.strides[0] = j.rope.sin.strides[0] = 120;
    CHECK(sinpe_run(&j, &o) == SINPE_OK); /* a partial rotation */
    j.rope.cos.shape[2] = 10;
    CHECK(sinpe_run(&j, &o) == SINPE_E_TABLES);
    j.rope.sin.shape[2] = 10;
    j.rope.cos.strides[1] = j.rope.sin.strides[1] = 40;
    j.rope.cos.strides[0] = j.rope.sin.strides[0] = 200;
    CHECK(sinpe_run(&j, &o) == SINPE_E_ROT);

    /* a GRID preset: the angles are the components (r / W, r % W), a leading row at (0, 0) */
    float g[7 * 2];
    const float one[2] = { 1.0f, 1.0f };
    const int32_t comp[2] = { 0, 1 };
    const int64_t col[2] = { 4 * 0 + SINPE_COL_ANGLE, 4 * 1 + SINPE_COL_ANGLE };
    sinpe_preset sp = { .nang = 2, .freq = one, .ncomp = 2, .comp = comp, .col = col, .ncol = 2,
                        .zero_row = -1 };
    int64_t gs[2] = { 7, 2 };
    sinpe_job_init(&j, g, 2, gs, 0.0);
    j.preset = &sp;
    j.pos.mode = SINPE_POS_GRID;
    j.pos.grid_h = 2;
    j.pos.grid_w = 3;
    j.pos.grid_lead = 1;
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    ok = g[0] == 0.0f && g[1] == 0.0f;
    for (int r = 0; r < 6; r++)
        ok &= g[2 * (r + 1)] == (float)(r / 3) && g[2 * (r + 1) + 1] == (float)(r % 3);
    CHECK(ok);
    sp.ncomp = 1;
    CHECK(sinpe_run(&j, &o) == SINPE_E_PRESET);

    /* a preset with no angles and no columns (rotary-embedding-torch dim=1): an empty table,
     * for 0 rows and for 5 (the fuzzer's division by a zero row length) */
    sinpe_preset none = { .nang = 0, .freq = one, .ncomp = 1, .col = col, .ncol = 0,
                          .zero_row = -1 };
    float nothing[1];
    float npos[5] = { 0, 1, 2, 3, 4 };
    for (int64_t n = 0; n <= 5; n += 5) {
        int64_t es[2] = { n, 0 };
        sinpe_job_init(&j, nothing, 2, es, 0.0);
        j.preset = &none;
        use_positions(&j, npos, SINPE_F32, n, 4);
        CHECK(sinpe_run(&j, &o) == SINPE_OK);
    }

    /* rows at the end of int64, by offset (torch's tensor from row 0 would pass int64: the
     * rows are their own), equal the same positions as an array, on the SLEEF backend */
    sinpe_opts sl = opts_of("sleef", 0, 2);
    sl.sleef.lanes = 4;
    sl.sleef.torch_threads = 3;
    float e1[2 * 64], e2[2 * 64];
    int64_t es[2] = { 2, 64 }, ends[2] = { INT64_MAX - 1, INT64_MAX };
    sinpe_job_init(&j, e1, 2, es, 10000.0);
    j.offset = INT64_MAX - 1;
    CHECK(sinpe_run(&j, &sl) == SINPE_OK);
    sinpe_job_init(&j, e2, 2, es, 10000.0);
    use_positions(&j, ends, SINPE_I64, 2, 8);
    CHECK(sinpe_run(&j, &sl) == SINPE_OK && same_bits(e1, e2, sizeof e1));

    /* the memory rule: a fresh result past this machine's memory, or past any address */
    sinpe_job_init(&j, NULL, 2, gs, 10000.0);
    j.fresh = 1;
    j.rows = (int64_t)1 << 40;
    j.cols = 1024;
    int64_t phys = sinpe_physical_memory();
    CHECK(sinpe_job_prepare(&j, &o) == (phys > 0 ? SINPE_E_MEMORY : SINPE_OK));
    sinpe_need need;
    sinpe_job_need(&j, &o, &need);
    CHECK(need.fresh == ((int64_t)1 << 42) * 1024 && need.physical == phys);
    j.rows = (int64_t)1 << 62;
    CHECK(sinpe_job_prepare(&j, &o) == SINPE_E_SIZE);
    int64_t big[2] = { (int64_t)1 << 40, 1024 };
    CHECK(sinpe_admit(2, big, SINPE_F32, 0, &need) == (phys > 0 ? SINPE_E_MEMORY : SINPE_OK));
    CHECK(sinpe_admit(-1, big, SINPE_F32, 0, &need) == SINPE_OK && need.fresh == 0);
    big[0] = -1;
    CHECK(sinpe_admit(2, big, SINPE_F32, 0, &need) == SINPE_E_SIZE);
    sinpe_job_init(&j, NULL, 2, gs, 10000.0);
    CHECK(sinpe_run(&j, &o) == SINPE_E_NULL); /* no memory and not fresh */
}

/* Kept rows (sinpe.h: sinpe_job.kept, a cache's): read as they are, filled first, or
 * refused when they do not suit the job; the bits are the job's own either way. */
static void kept_rows(const float *t)
{
    static float kept[64 * D], u[L * D], x[2 * 8 * D];
    sinpe_opts o = opts_of("builtin", sinpe_path_best(), 2), sl = opts_of("sleef", 0, 2);
    sinpe_job j;
    int64_t shape[2] = { 8, D }, xs[3] = { 2, 8, D };
    /* fill positions 4 .. 20 of a block from position 4, then a table of rows 6 .. 13 */
    memset(kept, 0xff, sizeof kept);
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    j.offset = 6;
    j.kept = (sinpe_kept){ kept, 4, 40, D, 4, 20, 0, 0, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    CHECK(same_bits(u, t + 6 * D, 8 * D * sizeof(float)));
    CHECK(same_bits(kept, t + 4 * D, 16 * D * sizeof(float)));
    /* read only (no fill): an add of rows 10 .. 17 to two blocks */
    for (int i = 0; i < 2 * 8 * D; i++)
        x[i] = 1.0f;
    sinpe_job_init(&j, x, 3, xs, 10000.0);
    j.kind = SINPE_JOB_ADD;
    j.offset = 10;
    j.kept = (sinpe_kept){ kept, 4, 16, D, 4, 4, 4, 20, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    int ok = 1;
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 8 * D; i++)
            ok &= x[b * 8 * D + i] == 1.0f + t[10 * D + i];
    CHECK(ok);
    /* an add to no blocks (an empty leading axis) still fills the kept rows it was given:
     * the fill stage has its divisors and slot though the job has no tiles */
    int64_t none[3] = { 0, 8, D };
    memset(kept, 0xff, sizeof kept);
    sinpe_job_init(&j, x, 3, none, 10000.0);
    j.kind = SINPE_JOB_ADD;
    j.offset = 4;
    j.kept = (sinpe_kept){ kept, 4, 40, D, 4, 12, 0, 0, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    CHECK(same_bits(kept, t + 4 * D, 8 * D * sizeof(float)));
    sinpe_job_init(&j, x, 3, xs, 10000.0); /* the rest as before: positions 4 .. 20 */
    j.kind = SINPE_JOB_ADD;
    j.offset = 12;
    j.kept = (sinpe_kept){ kept, 4, 40, D, 12, 20, 0, 0, 0 };
    for (int i = 0; i < 2 * 8 * D; i++)
        x[i] = 0.0f;
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    CHECK(same_bits(kept, t + 4 * D, 16 * D * sizeof(float)));
    /* by positions: kept rows read for integers inside, computed for the others */
    float pos[8] = { 5, 7, 19, 2.5f, 30, 4, 6, 8 };
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    use_positions(&j, pos, SINPE_F32, 8, 4);
    j.kept = (sinpe_kept){ kept, 4, 16, D, 4, 4, 4, 20, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    static float want[8 * D];
    sinpe_job_init(&j, want, 2, shape, 10000.0);
    use_positions(&j, pos, SINPE_F32, 8, 4);
    CHECK(sinpe_run(&j, &o) == SINPE_OK && same_bits(u, want, sizeof want));
    /* only the rows filled are read, whatever the buffer holds past them (issue 25): a
     * buffer of 40 rows with 4 .. 19 filled (20 .. 43 hold NaN) serves position 30 by
     * computing it, and an offset past row 19 is refused */
    for (int i = 16 * D; i < 40 * D; i++)
        kept[i] = NAN;
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    use_positions(&j, pos, SINPE_F32, 8, 4);
    j.kept = (sinpe_kept){ kept, 4, 40, D, 4, 4, 4, 20, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_OK && same_bits(u, want, sizeof want));
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    j.offset = 15;
    CHECK(sinpe_run(&j, &o) == SINPE_OK);
    j.kept = (sinpe_kept){ kept, 4, 40, D, 4, 4, 4, 20, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    j.kept = (sinpe_kept){ kept, 4, 40, D, 30, 32, 4, 20, 0 }; /* two intervals apart */
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    j.kept = (sinpe_kept){ kept, 4, 40, D, 4, 4, 2, 20, 0 }; /* filled rows outside */
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    /* a buffer the caller makes after prepare (kept.reserve) is admitted with the fresh
     * result by the memory rule: past this machine's memory, refused before anything */
    {
        sinpe_job r;
        int64_t big[2] = { 8, D };
        sinpe_job_init(&r, NULL, 2, big, 10000.0);
        r.fresh = 1;
        r.rows = 8;
        r.cols = D;
        r.kept = (sinpe_kept){ NULL, 0, 0, 0, 0, 0, 0, 0, (int64_t)1 << 59 };
        CHECK(sinpe_physical_memory() <= 0 || sinpe_job_prepare(&r, &o) == SINPE_E_MEMORY);
        r.kept.reserve = 1 << 20;
        CHECK(sinpe_job_prepare(&r, &o) == SINPE_OK);
    }
    /* refusals: rows outside, a fill outside, a short stride, SLEEF by positions, a preset,
     * own_tensor, kept rows that are the destination */
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    j.offset = 15;
    j.kept = (sinpe_kept){ kept, 4, 16, D, 4, 4, 4, 20, 0 }; /* holds 4 .. 19, the job needs 15 .. 22 */
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    j.kept = (sinpe_kept){ kept, 4, 40, D, 30, 50, 0, 0, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    j.kept = (sinpe_kept){ kept, 4, 40, D - 2, 4, 4, 0, 0, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    j.kept = (sinpe_kept){ kept, 4, 40, D, 4, 4, 0, 0, 0 };
    j.own_tensor = 1;
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    /* rows so far out that torch's tensor from row 0 would pass int64 (their own tensor):
     * the fill indexed them from row 0 and overflowed (UBSan, a hostile probe) */
    int64_t far = INT64_MAX / (D / 2) - 4;
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    j.offset = far;
    j.kept = (sinpe_kept){ kept, far, 40, D, far, far + 8, 0, 0, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    j.kept = (sinpe_kept){ kept, far, 40, D, far, far, 0, 0, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    CHECK(sinpe_run(&j, &sl) == SINPE_E_KEPT);
    sinpe_job_init(&j, u, 2, shape, 10000.0);
    use_positions(&j, pos, SINPE_F32, 8, 4);
    j.kept = (sinpe_kept){ kept, 4, 16, D, 4, 4, 4, 20, 0 };
    CHECK(sinpe_run(&j, &sl) == SINPE_E_KEPT);
    sinpe_job_init(&j, kept + 4 * D, 2, shape, 10000.0);
    j.offset = 4;
    j.kept = (sinpe_kept){ kept, 4, 16, D, 4, 4, 4, 20, 0 };
    CHECK(sinpe_run(&j, &o) == SINPE_E_KEPT);
    CHECK(strcmp(sinpe_strerror(SINPE_E_KEPT), "the kept rows do not suit the job") == 0);
}

/* One preparation: sinpe_plan_prepare checks and plans a fresh job, which runs once its
 * destination is bound; a destination of other strides is refused, and the same job's
 * errors come from prepare as from the check. */
static void prepared_plans(const float *t)
{
    static float u[L * D];
    sinpe_job j;
    int64_t shape[2] = { L, D };
    sinpe_job_init(&j, NULL, 2, shape, 10000.0);
    j.fresh = 1;
    j.rows = L;
    j.cols = D;
    sinpe_plan *p;
    CHECK(sinpe_plan_prepare(&j, &SCALAR, &p) == SINPE_OK);
    CHECK(j.dst.ndim == 2 && j.dst.shape[0] == L && j.dst.strides[0] == 4 * D);
    int64_t bad[2] = { 4 * D + 4, 4 };
    CHECK(sinpe_plan_bind(p, u, bad) == SINPE_E_SHAPE);
    CHECK(sinpe_plan_bind(p, (char *)u + 1, j.dst.strides) == SINPE_E_SHAPE);
    CHECK(sinpe_plan_bind(p, u, j.dst.strides) == SINPE_OK);
    int done = 0;
    while (!done)
        CHECK(sinpe_plan_step(p, INT64_MAX, &done) == SINPE_OK);
    sinpe_plan_free(p);
    CHECK(same_bits(u, t, sizeof u));
    sinpe_job_init(&j, u, 2, shape, -1.0); /* a bad base: the check's own status */
    CHECK(sinpe_plan_prepare(&j, &SCALAR, &p) == SINPE_E_BASE && p == NULL);
    CHECK(sinpe_plan_new(&j, &SCALAR, &p) == SINPE_E_BASE && p == NULL);
    sinpe_job_init(&j, u, 2, shape, 10000.0); /* not fresh: nothing to bind */
    CHECK(sinpe_plan_prepare(&j, &SCALAR, &p) == SINPE_OK);
    CHECK(sinpe_plan_bind(p, u, j.dst.strides) == SINPE_E_NULL);
    sinpe_plan_free(p);
}

/* The held add (sinpe.h: sinpe_add_held): the ADD job's bits, and every layout it does not
 * take refused with nothing written. */
static sinpe_array held_array(void *data, sinpe_type t, int64_t b, int64_t l, int64_t d)
{
    sinpe_array a;
    memset(&a, 0, sizeof a);
    int size = sinpe_type_size(t);
    a.data = data;
    a.type = t;
    a.ndim = 3;
    a.shape[0] = b, a.shape[1] = l, a.shape[2] = d;
    a.strides[2] = size, a.strides[1] = d * size, a.strides[0] = l * d * size;
    return a;
}

static void held_add(const float *t)
{
    enum { B = 3 };
    static float x[B * L * D + 1], want[B * L * D], keep[B * L * D + 1];
    for (int i = 0; i < B * L * D + 1; i++)
        x[i] = (float)(i % 37) * 0.37f - 5.0f;
    x[5] = NAN, x[6] = INFINITY, x[7] = 3.4e38f, x[8] = -1e-40f;
    memcpy(want, x, sizeof want);
    CHECK(sinpe_add(want, B, L, D, L * D, D, 0, 10000.0, &SCALAR) == SINPE_OK);
    sinpe_array rows = held_array((void *)(uintptr_t)t, SINPE_F32, 1, L, D);
    rows.ndim = 2, rows.shape[0] = L, rows.shape[1] = D, rows.strides[0] = D * 4, rows.strides[1] = 4;
    for (int p = 0; p < sinpe_path_count(); p++) {
        if (!sinpe_path_available(p))
            continue;
        float y[B * L * D];
        memcpy(y, x, sizeof y);
        sinpe_array xa = held_array(y, SINPE_F32, B, L, D);
        CHECK(sinpe_add_held(&xa, &rows, p, 1) == SINPE_OK);
        CHECK(same_bits(y, want, sizeof y));
    }
    memcpy(keep, x, sizeof keep);
    sinpe_array xa = held_array(x, SINPE_F32, B, L, D);
    sinpe_array bad = xa;
    bad.readonly = 1;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_READONLY);
    bad = xa, bad.strides[2] = 8, bad.shape[2] = D / 2;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_SHAPE);
    bad = held_array(x, SINPE_F32, B, D, L); /* transposed rows: another shape */
    bad.strides[1] = 4, bad.strides[2] = D * 4, bad.shape[1] = L, bad.shape[2] = D;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_KEPT);
    bad = held_array((char *)x + 1, SINPE_F32, B, L, D); /* unaligned */
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_KEPT);
    bad = xa, bad.type = SINPE_I32;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_TYPE);
    bad = xa, bad.shape[0] = 0;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_SIZE);
    bad = xa, bad.shape[0] = INT64_MAX / 2;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_SIZE);
    bad = xa, bad.ndim = 1;
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_DIMS);
    bad = held_array((void *)(uintptr_t)(t + 1), SINPE_F32, 1, L, D); /* inside the rows */
    CHECK(sinpe_add_held(&bad, &rows, 0, 1) == SINPE_E_OVERLAP);
    CHECK(sinpe_add_held(&xa, &rows, 99, 1) == SINPE_E_PATH);
    CHECK(sinpe_add_held(NULL, &rows, 0, 1) == SINPE_E_NULL);
    CHECK(same_bits(x, keep, sizeof keep));
}

/* Parallel work on an OpenMP runtime already loaded (the system's libgomp, loaded here as
 * torch loads its own): refused until it is loaded and for a library without libgomp's entry
 * points; once adopted, every item exactly once and the same bits at any thread count; a
 * forked child is back on sinpe's own threads; NULL returns to them. */
static void openmp_runtime(const float *t)
{
#ifndef _WIN32
    CHECK(sinpe_set_thread_runtime("/nonexistent/libgomp.so.1") == SINPE_E_RUNTIME);
    CHECK(sinpe_set_thread_runtime("libm.so.6") == SINPE_E_RUNTIME); /* loaded, not OpenMP */
    CHECK(sinpe_thread_runtime() == 0);
    void *h = dlopen("libgomp.so.1", RTLD_NOW);
    CHECK(h != NULL);
    if (!h)
        return;
    CHECK(sinpe_set_thread_runtime("libgomp.so.1") == SINPE_OK && sinpe_thread_runtime() == 1);
    for (int n = 0; n <= 200; n += n < 10 ? 1 : 37)
        for (int threads = 1; threads <= 4; threads++) {
            pf_ctx c;
            memset(&c, 0, sizeof c);
            c.slow_tid = -1;
            CHECK(sinpe_parallel_for(n, 3, threads, pf_task, &c) == sinpe_parallel_count(n, 3, threads));
            int once = 1, outside = 0;
            for (int i = 0; i < n; i++)
                once &= c.seen[i] == 1;
            for (int k = threads; k < SINPE_MAX_THREADS; k++)
                outside += c.by_tid[k];
            CHECK(once && outside == 0);
        }
    static float u[L * D];
    for (int threads = 2; threads <= 3; threads++) {
        sinpe_opts o = opts_of("builtin", sinpe_path_best(), threads);
        CHECK(sinpe_table(u, L, D, 10000.0, &o) == SINPE_OK && same_bits(t, u, sizeof u));
    }
    pid_t pid = fork();
    if (pid == 0) {
        sinpe_opts o = opts_of("builtin", sinpe_path_best(), 2);
        int ok = sinpe_thread_runtime() == 0 && sinpe_table(u, L, D, 10000.0, &o) == SINPE_OK
                 && same_bits(t, u, sizeof u);
        _exit(ok ? 0 : 1);
    }
    int status = -1;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)
          && WEXITSTATUS(status) == 0);
    CHECK(sinpe_thread_runtime() == 1); /* the parent keeps it */
    CHECK(sinpe_set_thread_runtime(NULL) == SINPE_OK && sinpe_thread_runtime() == 0);
#else
    (void)t;
    CHECK(sinpe_set_thread_runtime("libgomp.so.1") == SINPE_E_RUNTIME);
#endif
}

int main(void)
{
    SCALAR = opts_of("builtin", 0, 1);
    static float t[L * D];
    CHECK(sinpe_table(t, L, D, 10000.0, &SCALAR) == SINPE_OK);
    good_calls(t);
    types_and_layouts(t);
    aliasing_positions(t);
    overlaps();
    steps();
    errors();
    parallel_for();
    job_kinds();
    kept_rows(t);
    prepared_plans(t);
    held_add(t);
    openmp_runtime(t);
    printf("%d failed, %d passed\n", failures, checks - failures);
    return failures ? 1 : 0;
}
