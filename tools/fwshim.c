/* ctypes shim for tools/fwcheck.py: the frameworks' element models (src/elem/fw_*.c,
 * src/elem/glibcf.c, src/elem/powf.c) and this process's own libm, mapped over arrays.
 *   make -C tools libfwmodels.so */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "elem/fwmath.h"
#include "elem/glibcf.h"
#include "elem/powf.h"

typedef float (*f1)(float, int);

static float np_exp(float x, int f) { (void)f; return sinpe_numpy_expf(x); }
static float xla_exp(float x, int f) { (void)f; return sinpe_xla_expf(x); }
static float libm_sin(float x, int f) { (void)f; return sinf(x); }
static float libm_cos(float x, int f) { (void)f; return cosf(x); }
static float libm_exp(float x, int f) { (void)f; return expf(x); }

static const struct { const char *name; f1 fn; } FNS[] = {
    { "glibc_sin", sinpe_glibc_sinf }, { "glibc_cos", sinpe_glibc_cosf },
    { "glibc_exp", sinpe_glibc_expf },
    { "numpy_sin", sinpe_numpy_sinf }, { "numpy_cos", sinpe_numpy_cosf },
    { "numpy_exp", np_exp },
    { "eigen_sin", sinpe_eigen_sinf }, { "eigen_cos", sinpe_eigen_cosf },
    { "eigen_exp", sinpe_eigen_expf },
    { "mlas_exp", sinpe_mlas_expf }, { "xla_exp", xla_exp },
    { "libm_sin", libm_sin }, { "libm_cos", libm_cos }, { "libm_exp", libm_exp },
};

/* out[i] = name(in[i], flag); -1 for an unknown name. */
int fw_map(const char *name, int flag, const float *in, float *out, int64_t n)
{
    for (size_t k = 0; k < sizeof FNS / sizeof FNS[0]; k++) {
        if (strcmp(FNS[k].name, name) == 0) {
            for (int64_t i = 0; i < n; i++)
                out[i] = FNS[k].fn(in[i], flag);
            return 0;
        }
    }
    return -1;
}

/* pow: out[i] = x[i] ** y[i], the model (which 0: glibc unfused, 1: fused; 3, 4: the same
 * under FTZ/DAZ; 5: Eigen's, under FTZ/DAZ, TensorFlow's) or libm (2). */
void fw_pow(int which, const float *x, const float *y, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = which == 5   ? sinpe_eigen_powf(x[i], y[i], 1)
                 : which == 2 ? powf(x[i], y[i])
                 : which >= 3 ? sinpe_powf_glibc_ftz(x[i], y[i], which - 3)
                              : sinpe_powf_glibc(x[i], y[i], which);
}

/* The glibc FMA variant's choice on this CPU. */
int fw_glibc_fused(void)
{
    return sinpe_glibc_powf_fused();
}
