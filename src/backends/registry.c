/* The one table of backends: adding a backend is its file and one line here. */
#include "backends/backend.h"

extern const sinpe_backend_ops sinpe_backend_builtin, sinpe_backend_mkl, sinpe_backend_torch,
    sinpe_backend_sleef;

static const sinpe_backend_ops *const BACKENDS[] = {
    &sinpe_backend_builtin, /* correctly rounded kernels, the same bits everywhere */
    &sinpe_backend_mkl,     /* oneMKL VML from the mkl wheel */
    &sinpe_backend_torch,   /* oneMKL VML inside the installed torch */
    &sinpe_backend_sleef,   /* torch on 64-bit Arm: SLEEF as torch calls it */
};

int sinpe_backends_count(void)
{
    return (int)(sizeof BACKENDS / sizeof BACKENDS[0]);
}

const sinpe_backend_ops *sinpe_backends_get(int b)
{
    return b >= 0 && b < sinpe_backends_count() ? BACKENDS[b] : NULL;
}
