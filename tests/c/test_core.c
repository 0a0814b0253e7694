/* C-level test driver of sinpe_core (no Python): good calls, every error
 * path, and the oneMKL loader's failure paths.  Run under valgrind and the
 * sanitizers by tests/test_sanitizers.py:
 *   cc -O1 -g -ffp-contract=off -Isrc tests/c/test_core.c src/sinpe_*.c -lm -ldl -lpthread
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinpe_core.h"

static int failures;
#define CHECK(cond)                                                         \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                     \
        }                                                                   \
    } while (0)

static int same_bits(const float *a, const float *b, size_t n)
{
    return memcmp(a, b, n * sizeof(float)) == 0;
}

int main(void)
{
    sinpe_opts o = { SINPE_BACKEND_BUILTIN, SINPE_KERNEL_SCALAR, 1 };
    enum { L = 37, D = 24 };
    float *t = malloc(sizeof(float) * L * D), *u = malloc(sizeof(float) * L * D);
    CHECK(t && u);

    /* good calls: scalar, and the best path with threads, give the same bits */
    CHECK(sinpe_table(t, L, D, 10000.0, &o) == SINPE_OK);
    CHECK(t[0] == 0.0f && t[1] == 1.0f);
    sinpe_opts fast = { SINPE_BACKEND_BUILTIN, sinpe_kernel_best(), 3 };
    CHECK(sinpe_table(u, L, D, 10000.0, &fast) == SINPE_OK);
    CHECK(same_bits(t, u, (size_t)L * D));

    /* positions and pieces: rows 5.. of the table */
    float pos[4] = { 5, 6, 7, 8 };
    CHECK(sinpe_table_at(u, pos, 0, 4, D, 10000.0, &o) == SINPE_OK);
    CHECK(same_bits(u, t + 5 * D, 4 * D));
    CHECK(sinpe_table_at(u, NULL, 5, 4, D, 10000.0, &o) == SINPE_OK);
    CHECK(same_bits(u, t + 5 * D, 4 * D));

    /* add: 2 batch elements of rows 3..5 */
    float x[2 * 3 * D];
    for (int i = 0; i < 2 * 3 * D; i++)
        x[i] = 1.0f;
    CHECK(sinpe_add(x, 2, 3, D, 3 * D, D, 3, 10000.0, &fast) == SINPE_OK);
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 3 * D; i++)
            CHECK(x[b * 3 * D + i] == 1.0f + t[3 * D + i]);

    /* elementwise */
    float in[5] = { 0.0f, 1.0f, -2.5f, 1e30f, NAN }, out[5];
    CHECK(sinpe_map(1, in, out, 5, &o) == SINPE_OK);
    CHECK(out[0] == 0.0f && isnan(out[4]));
    CHECK(sinpe_map(0, in, out, 5, &fast) == SINPE_OK && out[0] == 1.0f);

    /* error paths: nothing written */
    for (int i = 0; i < 2 * 3 * D; i++)
        x[i] = 7.0f;
    CHECK(sinpe_table(x, 3, 7, 10000.0, &o) == SINPE_E_DMODEL);
    CHECK(sinpe_table(x, 3, 0, 10000.0, &o) == SINPE_E_DMODEL);
    CHECK(sinpe_table(x, -1, 8, 10000.0, &o) == SINPE_E_MAXLEN);
    CHECK(sinpe_table(x, 3, 8, NAN, &o) == SINPE_E_BASE);
    CHECK(sinpe_table(x, 3, 8, -1.0, &o) == SINPE_E_BASE);
    CHECK(sinpe_table(x, 3, 8, INFINITY, &o) == SINPE_E_BASE);
    CHECK(sinpe_table(x, (int64_t)1 << 62, 1024, 10000.0, &o) == SINPE_E_SIZE);
    CHECK(sinpe_table(NULL, 3, 8, 10000.0, &o) == SINPE_E_NULL);
    CHECK(sinpe_table(x, 3, 8, 10000.0, NULL) == SINPE_E_NULL);
    CHECK(sinpe_table_at(x, NULL, -1, 3, 8, 10000.0, &o) == SINPE_E_OFFSET);
    CHECK(sinpe_add(x, 1, 3, 8, 24, 8, -1, 10000.0, &o) == SINPE_E_OFFSET);
    CHECK(sinpe_add(x, 1, 3, 8, 24, 8, INT64_MAX - 1, 10000.0, &o) == SINPE_E_OFFSET);
    CHECK(sinpe_add(x, -1, 3, 8, 24, 8, 0, 10000.0, &o) == SINPE_E_MAXLEN);
    sinpe_opts bad_kernel = { SINPE_BACKEND_BUILTIN, (sinpe_kernel)99, 1 };
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_kernel) == SINPE_E_KERNEL);
    sinpe_opts bad_backend = { (sinpe_backend)5, SINPE_KERNEL_SCALAR, 1 };
    CHECK(sinpe_table(x, 3, 8, 10000.0, &bad_backend) == SINPE_E_BACKEND);
    CHECK(sinpe_map(7, in, out, 5, &o) == SINPE_E_BACKEND);
    for (int i = 0; i < 2 * 3 * D; i++)
        CHECK(x[i] == 7.0f);

    /* oneMKL backend: not loaded, and load failures */
    if (!sinpe_mkl_loaded()) {
        sinpe_opts mkl = { SINPE_BACKEND_MKL, SINPE_KERNEL_SCALAR, 1 };
        CHECK(sinpe_table(x, 3, 8, 10000.0, &mkl) == SINPE_E_BACKEND);
        char msg[256];
        CHECK(sinpe_mkl_load("/nonexistent/libmkl_rt.so.2", msg, sizeof msg) == SINPE_E_LOAD);
        CHECK(strstr(msg, "dlopen failed") != NULL);
        CHECK(sinpe_mkl_load(NULL, msg, sizeof msg) == SINPE_E_LOAD);
        CHECK(sinpe_mkl_load("libm.so.6", msg, sizeof msg) == SINPE_E_LOAD);
        CHECK(!sinpe_mkl_loaded());
    }
    for (int s = 0; s <= 11; s++)
        CHECK(sinpe_strerror(s) != NULL);

    free(t);
    free(u);
    printf("%d failed, %d passed\n", failures, failures ? 0 : 1);
    return failures ? 1 : 0;
}
