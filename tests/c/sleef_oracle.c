/* An independent oracle for the 'sleef' backend: SLEEF's own float32 functions as the
 * installed torch exports them.  Every x86-64 torch wheel exports SLEEF's vector functions
 * from libtorch_cpu (Sleef_sinf8_u10avx2, Sleef_cosf8_u35avx2, Sleef_expf8_u10avx2, the
 * 16-lane *avx512f ones: `nm -D --defined-only libtorch_cpu.so`), built from the SLEEF
 * sources that torch's aarch64 wheels call through Sleef_*f4_* (NEON, SVE128) and the
 * 8-lane forms (SVE256).  The x86 builds with FMA compute the same operations in the same
 * order (docs/testing.md: measured equal to sinpe's profiles and to real aarch64 torch).
 *
 * Built by tests/conftest.py with gcc (-mavx2 -mfma; the 16-lane calls in functions of
 * their own target) against nothing: the library is opened with dlopen at the path the
 * test passes (torch's own lib/libtorch_cpu.so).
 *
 * torch splits an elementwise op over its threads (at::parallel_for, grain 2048:
 * min(threads, ceil(n / 2048)) chunks of ceil(n / chunks) elements) and maps each chunk in
 * vectors of `lanes` elements (4 or 8), the last one zero-padded (at::vec::map).  SLEEF
 * decides its reduction per vector (one lane that needs the long path sends every lane
 * down it), so a 4-lane group must decide alone: it is copied into every quarter (or
 * half) of the wider vector, which then holds the same set of values and takes the path
 * the 4-lane vector takes; lanes are otherwise independent.  Every group of every lane
 * count can be served so, by the 8-lane functions (AVX2 + FMA) and by the 16-lane ones
 * (AVX-512F). */
#include <dlfcn.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef __m256 (*fn8)(__m256);
typedef __m512 (*fn16)(__m512);

/* [func][u35]: func 0 exp (always u10), 1 sin, 2 cos */
static fn8 F8[3][2];
static fn16 F16[3][2];

static void *find(void *h, const char *fmt, const char *fn, const char *u, char *msg, int len)
{
    char name[64];
    snprintf(name, sizeof name, fmt, fn, u);
    void *f = dlsym(h, name);
    if (!f)
        snprintf(msg, (size_t)len, "%s is not exported", name);
    return f;
}

/* Opens the library at path and resolves the functions.  Returns a bit mask of the widths
 * found (1: 8 lanes, 2: 16 lanes), 0 with the reason in msg. */
int oracle_open(const char *path, char *msg, int len)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(msg, (size_t)len, "dlopen: %s", dlerror());
        return 0;
    }
    static const char *fn[3] = { "exp", "sin", "cos" }, *u[2] = { "u10", "u35" };
    int have = 3;
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < (f ? 2 : 1); k++) {
            F8[f][k] = (fn8)find(h, "Sleef_%sf8_%savx2", fn[f], u[k], msg, len);
            F16[f][k] = (fn16)find(h, "Sleef_%sf16_%savx512f", fn[f], u[k], msg, len);
            if (!F8[f][k])
                have &= ~1;
            if (!F16[f][k])
                have &= ~2;
        }
    return have;
}

static void call8(fn8 f, const float *in, float *out)
{
    _mm256_storeu_ps(out, f(_mm256_loadu_ps(in)));
}

__attribute__((target("avx512f"))) static void call16(fn16 f, const float *in, float *out)
{
    _mm512_storeu_ps(out, f(_mm512_loadu_ps(in)));
}

static int64_t divup(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* torch's f(in) of n floats with torch's grouping (lanes 4 or 8, threads >= 1), computed by
 * the exported functions of `width` lanes (8 or 16).  u35: the 3.5-ULP sin/cos. */
int oracle_map(int func, int u35, int lanes, int threads, int width, const float *in,
               float *out, int64_t n)
{
    if (func < 0 || func > 2 || (lanes != 4 && lanes != 8) || (width != 8 && width != 16)
        || threads < 1)
        return -1;
    int k = func ? (u35 != 0) : 0;
    if ((width == 8 && !F8[func][k]) || (width == 16 && !F16[func][k]))
        return -2;
    int64_t chunk = n;
    if (n > 2048 && threads > 1) {
        int64_t t = divup(n, 2048) < threads ? divup(n, 2048) : threads;
        chunk = divup(n, t);
    }
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        int64_t cend = c0 + chunk < n ? c0 + chunk : n;
        for (int64_t v = c0; v < cend; v += lanes) {
            float group[8] = { 0 }, buf[16], res[16];
            int64_t m = cend - v < lanes ? cend - v : lanes;
            memcpy(group, in + v, (size_t)m * sizeof(float)); /* zero-padded, as torch */
            for (int r = 0; r < width; r += lanes) /* the group in every part of the vector */
                memcpy(buf + r, group, (size_t)lanes * sizeof(float));
            if (width == 8)
                call8(F8[func][k], buf, res);
            else
                call16(F16[func][k], buf, res);
            memcpy(out + v, res, (size_t)m * sizeof(float));
        }
    }
    return 0;
}
