/* Checks of sinpe's float32 pow functions (docs/presets.md):
 *   1. sinpe_sleef_powf against SLEEF's own Sleef_powf16_u10avx512f / Sleef_powf8_u10avx2 as
 *      the installed torch exports them (libtorch_cpu.so, argument 1) - the functions
 *      torch.pow calls on x86-64;
 *   2. sinpe_powf_glibc against this machine's powf (glibc), fused form as glibc selects;
 *   3. sinpe_powf_cr against MPFR's mpfr_pow (correct rounding).
 * Inputs: the presets' grids (bases 10000, 1e-4, 5e5, 100, 1e6, 10, 2; exponents k/d and
 * 2(k//2)/d for d <= 4096) and `count` random pairs (argument 2, default 10^7): positive x of
 * any exponent with y such that |y log2 x| < 160, and fully random bit patterns.
 * POWCHECK_FUSED=0 compares with glibc's unfused form (run it with
 * GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA, which makes glibc pick that form).
 *   make -C tools powcheck && tools/powcheck "$(python -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib","libtorch_cpu.so"))')"
 */
#include <dlfcn.h>
#include <immintrin.h>
#include <math.h>
#include <mpfr.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elem/crmath.h"
#include "elem/powf.h"
#include "elem/sleef.h"
#include "platform/cpu.h"

typedef __m512 (*pow16_fn)(__m512, __m512);
typedef __m256 (*pow8_fn)(__m256, __m256);
static pow16_fn pow16;
static pow8_fn pow8;

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

__attribute__((target("avx512f"))) static void torch16(const float *x, const float *y, float *o)
{
    _mm512_storeu_ps(o, pow16(_mm512_loadu_ps(x), _mm512_loadu_ps(y)));
}

__attribute__((target("avx2"))) static void torch8(const float *x, const float *y, float *o)
{
    _mm256_storeu_ps(o, pow8(_mm256_loadu_ps(x), _mm256_loadu_ps(y)));
}

static float mpfr_powf(float x, float y)
{
    static mpfr_t a, b, r;
    static int init;
    if (!init) {
        mpfr_inits2(24, a, b, r, (mpfr_ptr)0);
        mpfr_set_emin(-148);
        mpfr_set_emax(128);
        init = 1;
    }
    mpfr_set_flt(a, x, MPFR_RNDN);
    mpfr_set_flt(b, y, MPFR_RNDN);
    int t = mpfr_pow(r, a, b, MPFR_RNDN);
    t = mpfr_subnormalize(r, t, MPFR_RNDN);
    return mpfr_get_flt(r, MPFR_RNDN);
}

static long long bad_sleef16, bad_sleef8, bad_glibc, bad_cr, n_total, n_cr;

static int same(float a, float b)
{
    return bits(a) == bits(b) || (a != a && b != b && bits(a) == bits(b));
}

static void report(const char *what, float x, float y, float got, float want, long long *count)
{
    if (*count < 5)
        printf("  %s: pow(%a, %a) = %a, want %a\n", what, x, y, got, want);
    (*count)++;
}

/* n <= 16 pairs through every check. */
static void check(const float *x, const float *y, int n, int cr)
{
    float xs[16] = { 0 }, ys[16] = { 0 }, o16[16], o8[16];
    memcpy(xs, x, n * sizeof(float));
    memcpy(ys, y, n * sizeof(float));
    if (pow16)
        torch16(xs, ys, o16);
    if (pow8) {
        torch8(xs, ys, o8);
        torch8(xs + 8, ys + 8, o8 + 8);
    }
    int fused = getenv("POWCHECK_FUSED") ? atoi(getenv("POWCHECK_FUSED")) : sinpe_glibc_powf_fused();
    for (int i = 0; i < n; i++) {
        float s = sinpe_sleef_powf(x[i], y[i], 1);
        if (pow16 && !same(s, o16[i]))
            report("sleef avx512", x[i], y[i], s, o16[i], &bad_sleef16);
        if (pow8 && !same(s, o8[i]))
            report("sleef avx2", x[i], y[i], s, o8[i], &bad_sleef8);
        float g = sinpe_powf_glibc(x[i], y[i], fused), w = powf(x[i], y[i]);
        if (!same(g, w) && !(g != g && w != w))
            report("glibc", x[i], y[i], g, w, &bad_glibc);
        if (cr) {
            float c = sinpe_powf_cr(x[i], y[i]), m = mpfr_powf(x[i], y[i]);
            if (!same(c, m) && !(c != c && m != m))
                report("cr", x[i], y[i], c, m, &bad_cr);
            n_cr++;
        }
        n_total++;
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "powcheck: %s\n", dlerror());
            return 2;
        }
        if (sinpe_cpu()->avx512f && sinpe_cpu()->os_zmm)
            pow16 = (pow16_fn)dlsym(h, "Sleef_powf16_u10avx512f");
        if (sinpe_cpu()->avx2 && sinpe_cpu()->fma)
            pow8 = (pow8_fn)dlsym(h, "Sleef_powf8_u10avx2");
    }
    long long count = argc > 2 ? atoll(argv[2]) : 10000000;
    printf("powcheck: torch's SLEEF avx512f %s, avx2 %s; glibc fused form %d\n",
           pow16 ? "yes" : "no", pow8 ? "yes" : "no", sinpe_glibc_powf_fused());
    static const float bases[] = { 10000.0f, 1e-4f, 500000.0f, 100.0f, 1e6f, 10.0f, 2.0f,
                                   1000000000.0f, 0.5f, 3.0f };
    float xs[16], ys[16];
    int k = 0;
    for (size_t b = 0; !getenv("POWCHECK_NOGRID") && b < sizeof bases / sizeof bases[0]; b++)
        for (int d = 1; d <= 4096; d++)
            for (int i = 0; i <= d; i++) {
                xs[k] = bases[b];
                ys[k] = (float)i / (float)d;
                if (++k == 16) {
                    check(xs, ys, 16, 1);
                    k = 0;
                }
            }
    if (k)
        check(xs, ys, k, 1);
    long long grid = n_total;
    for (long long t = 0; t < count; t += 16) {
        for (int i = 0; i < 16; i++) {
            if (i < 12) { /* positive x, moderate y log2 x */
                float x = from_bits(next32() % 0x7f800000u);
                if (x == 0.0f)
                    x = 1.5f;
                double l = fabs(log2((double)x));
                double lim = l > 1e-30 ? 160.0 / l : 1e30;
                double u = (double)next32() / 4294967296.0 * 2.0 - 1.0;
                xs[i] = x;
                ys[i] = (float)(u * (lim < 1e30 ? lim : 1e30));
            } else {
                xs[i] = from_bits(next32() ^ (next32() << 16));
                ys[i] = from_bits(next32() ^ (next32() << 16));
            }
        }
        check(xs, ys, 16, 1);
    }
    printf("pairs: %lld (grid %lld); SLEEF avx512 differences %lld, avx2 %lld; glibc %lld; "
           "correctly rounded vs MPFR %lld of %lld\n",
           n_total, grid, bad_sleef16, bad_sleef8, bad_glibc, bad_cr, n_cr);
    return bad_sleef16 || bad_sleef8 || bad_glibc || bad_cr;
}
