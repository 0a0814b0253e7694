/* Scalar path of the built-in kernels: portable C, one angle at a time, through the
 * correctly rounded functions of elem/sincosf.c.  It runs on every CPU and is the reference
 * the vector paths are checked against. */
#include "elem/crmath.h"
#include "paths/path.h"

static int scalar_supported(void)
{
    return 1;
}

static void scalar_rows(float *out, ptrdiff_t ostride, const float *pos, int64_t first_row,
                        int64_t nrows, const float *div, int64_t half, float dmin, float dmax)
{
    (void)dmin;
    (void)dmax;
    for (int64_t r = 0; r < nrows; r++) {
        float p = pos ? pos[r] : (float)(first_row + r);
        float *dst = out + (ptrdiff_t)r * ostride;
        for (int64_t j = 0; j < half; j++)
            sinpe_sincosf(p * div[j], &dst[2 * j], &dst[2 * j + 1]);
    }
}

void sinpe_sincos_scalar(const float *a, float *s, float *c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        sinpe_sincosf(a[i], &s[i], &c[i]);
}

static void scalar_interleave(const float *s, const float *c, float *dst, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[2 * i] = s[i];
        dst[2 * i + 1] = c[i];
    }
}

static void scalar_add(float *x, const float *pe, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] += pe[i];
}

/* The correctly rounded kernels against MPFR, every float32 input (tools/exhaustive). */
static const sinpe_verification scalar_records[] = {
    { "exp", "an earlier project machine (x86-64)", "before 2026-12-01", 4294967296u, 0, 30,
      "tools/exhaustive exp" },
    { "sin", "an earlier project machine (x86-64)", "before 2026-12-01", 4294967296u, 0, 193,
      "tools/exhaustive sin" },
    { "cos", "an earlier project machine (x86-64)", "before 2026-12-01", 4294967296u, 0, 220,
      "tools/exhaustive cos" },
    { "exp", "AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL)", "2026-12-02 (loops from paths/body.h)", 4294967296u, 0, 30.9,
      "tools/exhaustive exp" },
    { "sin", "AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL)", "2026-12-02 (loops from paths/body.h)", 4294967296u, 0, 130.7,
      "tools/exhaustive sin --kernel scalar" },
    { "cos", "AMD EPYC family 26 (Zen 5, AVX-512F/DQ/BW/VL)", "2026-12-02 (loops from paths/body.h)", 4294967296u, 0, 133.6,
      "tools/exhaustive cos --kernel scalar" },
};

const sinpe_path_ops sinpe_path_scalar = {
    "scalar", scalar_supported, scalar_rows, sinpe_sincos_scalar, scalar_interleave, scalar_add,
    scalar_records, (int)(sizeof scalar_records / sizeof scalar_records[0]),
};
