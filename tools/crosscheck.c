/* Cross-architecture check of the portable path: writes the bits of
 * sinpe_expf/sinf/cosf on every STEP-th float32 bit pattern, and of a few
 * tables, to OUT.  Build it for two architectures and compare the files
 * (cmp): the kernels are correctly rounded, so every platform must agree.
 *   cc -O2 -ffp-contract=off -I../src -I../src/include crosscheck.c $(core sources) -lm -ldl -lpthread
 *   aarch64-linux-gnu-gcc ... ; qemu-aarch64 -L /usr/aarch64-linux-gnu ./crosscheck 251 arm.bin
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elem/crmath.h"
#include "sinpe.h"

static sinpe_opts opts_of(const char *backend, int path, int threads)
{
    sinpe_opts o;
    sinpe_opts_init(&o);
    o.backend = sinpe_backend_find(backend);
    o.path = path;
    o.threads = threads;
    return o;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s STEP OUT\n", argv[0]);
        return 2;
    }
    unsigned long step = strtoul(argv[1], NULL, 10);
    FILE *f = fopen(argv[2], "wb");
    if (!f || step == 0)
        return 2;
    unsigned long long n = 0;
    for (unsigned long long u = 0; u <= 0xffffffffull; u += step, n++) {
        float x, r[3];
        unsigned v = (unsigned)u;
        memcpy(&x, &v, 4);
        r[0] = sinpe_expf(x);
        r[1] = sinpe_sinf(x);
        r[2] = sinpe_cosf(x);
        fwrite(r, 4, 3, f);
    }
    /* tables on the scalar path, then the same on the best path (AVX2 or
     * NEON): the file holds both, so equal files mean equal paths too */
    static float t[3000 * 512];
    const double bases[3] = { 10000.0, 1.0001, 500000.0 };
    int paths[2] = { 0, sinpe_path_best() }; /* scalar, best */
    for (int k = 0; k < 2; k++) {
        sinpe_opts o = opts_of("builtin", paths[k], 2);
        for (int b = 0; b < 3; b++) {
            if (sinpe_table(t, 3000, 512, bases[b], &o) != SINPE_OK)
                return 1;
            fwrite(t, 4, 3000 * 512, f);
        }
    }
    /* in-place adds (the path's add) and float16 / bfloat16 tables (the
     * stores' rounding), on both paths */
    static float x[3 * 100 * 512];
    static uint16_t h[3000 * 512];
    for (int k = 0; k < 2; k++) {
        sinpe_opts o = opts_of("builtin", paths[k], 2);
        for (int i = 0; i < 3 * 100 * 512; i++)
            x[i] = (float)((i * 2654435761u) >> 8) * 0x1p-20f - 8.0f;
        if (sinpe_add(x, 3, 100, 512, 100 * 512, 512, 12345, 10000.0, &o) != SINPE_OK)
            return 1;
        fwrite(x, 4, 3 * 100 * 512, f);
        for (int t = 0; t < 2; t++) {
            sinpe_job j;
            int64_t shape[2] = { 3000, 512 };
            sinpe_job_init(&j, h, 2, shape, 10000.0);
            j.dst.type = t ? SINPE_BF16 : SINPE_F16;
            j.dst.strides[0] = 512 * 2;
            j.dst.strides[1] = 2;
            if (sinpe_run(&j, &o) != SINPE_OK)
                return 1;
            fwrite(h, 2, 3000 * 512, f);
        }
    }
    /* the 'sleef' backend (portable C with exact fmaf, an FMA copy on x86-64): tables of
     * every profile at torch thread counts 1 and 3 */
    for (int trig = 0; trig < 2; trig++)
        for (int lanes = 4; lanes <= 8; lanes += 4)
            for (int tt = 1; tt <= 3; tt += 2) {
                sinpe_opts o = opts_of("sleef", 0, 2);
                o.sleef.trig = trig;
                o.sleef.lanes = lanes;
                o.sleef.torch_threads = tt;
                if (sinpe_table(t, 3000, 510, 10000.0, &o) != SINPE_OK)
                    return 1;
                fwrite(t, 4, 3000 * 510, f);
            }
    /* elementwise sin and cos of the sampled inputs on the best path */
    sinpe_opts best = opts_of("builtin", sinpe_path_best(), 1);
    enum { CH = 4096 };
    static float xs[CH], rs[CH];
    for (int func = 1; func <= 2; func++) {
        unsigned long long u = 0;
        while (u <= 0xffffffffull) {
            int m = 0;
            for (; m < CH && u <= 0xffffffffull; m++, u += step) {
                unsigned v = (unsigned)u;
                memcpy(&xs[m], &v, 4);
            }
            sinpe_map((sinpe_func)func, xs, rs, m, &best);
            fwrite(rs, 4, (size_t)m, f);
        }
    }
    fclose(f);
    printf("%llu inputs x 3 functions, 3 tables of 3000 x 512, an add to 3 x 100 x 512, float16 "
           "and bfloat16 tables on the scalar and the %s path, 8 SLEEF-profile tables, sin/cos on "
           "the %s path: written to %s\n", n, sinpe_path_name(sinpe_path_best()),
           sinpe_path_name(sinpe_path_best()), argv[2]);
    return 0;
}
