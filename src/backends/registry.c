/* The one table of backends: adding a backend is its file, its name in backend.h's
 * SINPE_BACKEND_LIST and one line here. */
#include "backends/backend.h"

extern const sinpe_backend_ops sinpe_backend_builtin, sinpe_backend_mkl, sinpe_backend_torch,
    sinpe_backend_sleef, sinpe_backend_numpy, sinpe_backend_tensorflow, sinpe_backend_jax,
    sinpe_backend_onnxruntime, sinpe_backend_mlx;

#define SINPE_BACKEND_NAME_(id, name) [SINPE_BACKEND_##id] = name,
static const char *const NAMES[SINPE_BACKEND_COUNT] = { SINPE_BACKEND_LIST(SINPE_BACKEND_NAME_) };

static const sinpe_backend_ops *const BACKENDS[SINPE_BACKEND_COUNT] = {
    [SINPE_BACKEND_BUILTIN] = &sinpe_backend_builtin, /* correctly rounded kernels, everywhere */
    [SINPE_BACKEND_MKL] = &sinpe_backend_mkl,         /* oneMKL VML from the mkl wheel */
    [SINPE_BACKEND_TORCH] = &sinpe_backend_torch,     /* oneMKL VML inside the installed torch */
    [SINPE_BACKEND_SLEEF] = &sinpe_backend_sleef,     /* torch on 64-bit Arm: SLEEF */
    /* the frameworks' float32 functions on x86-64 (backends/frameworks.c) */
    [SINPE_BACKEND_NUMPY] = &sinpe_backend_numpy,
    [SINPE_BACKEND_TENSORFLOW] = &sinpe_backend_tensorflow,
    [SINPE_BACKEND_JAX] = &sinpe_backend_jax,
    [SINPE_BACKEND_ONNXRUNTIME] = &sinpe_backend_onnxruntime,
    [SINPE_BACKEND_MLX] = &sinpe_backend_mlx,
};

int sinpe_backends_count(void)
{
    return SINPE_BACKEND_COUNT;
}

const char *sinpe_backends_name(int b)
{
    return b >= 0 && b < SINPE_BACKEND_COUNT ? NAMES[b] : NULL;
}

const sinpe_backend_ops *sinpe_backends_get(int b)
{
    return b >= 0 && b < sinpe_backends_count() ? BACKENDS[b] : NULL;
}
