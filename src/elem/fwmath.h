/* The frameworks' float32 element functions on x86-64 (element layer, pure C):
 * elem/fw_numpy.c, elem/fw_eigen.c, elem/fw_eigen_pow.c, elem/fw_eigen219_pow.c,
 * elem/fw_mlas.c, elem/fw_xla.c, elem/fw_mlx.c.  Each computes one
 * element exactly as that framework's vector kernel does (every lane independent of the
 * others); which elements of a tensor a framework sends to its C library instead (its
 * scalar tail) is the backend's rule, not the element function's. */
#ifndef SINPE_ELEM_FWMATH_H
#define SINPE_ELEM_FWMATH_H

/* NumPy 2.x float32 ufuncs on AVX2+FMA3 or AVX-512 CPUs.  `fused`: whether the process's
 * glibc runs its FMA variants (NumPy's large and infinite lanes call sinf/cosf). */
float sinpe_numpy_sinf(float x, int fused);
float sinpe_numpy_cosf(float x, int fused);
float sinpe_numpy_expf(float x);
/* NumPy 1.26 and 2.0's sin and cos (elem/fw_numpy.c). */
float sinpe_numpy20_sinf(float x, int fused);
float sinpe_numpy20_cosf(float x, int fused);

/* Eigen's psin/pcos/pexp for float packets without FMA (TensorFlow's AVX build, ONNX
 * Runtime's SSE build), `ftz`: flush-to-zero and denormals-are-zero (TensorFlow). */
float sinpe_eigen_sinf(float x, int ftz);
float sinpe_eigen_cosf(float x, int ftz);
float sinpe_eigen_expf(float x, int ftz);
/* Eigen's generic_pow for float packets without FMA (TensorFlow's AVX build):
 * elem/fw_eigen_pow.c. */
float sinpe_eigen_powf(float x, float y, int ftz);
/* The same for TensorFlow 2.15 to 2.19's Eigen (an older log2 and 2^r): elem/fw_eigen219_pow.c. */
float sinpe_eigen219_powf(float x, float y, int ftz);

/* ONNX Runtime's MLAS exp (MlasComputeExpVector); `fused` on FMA3 CPUs. */
float sinpe_mlas_expf(float x, int fused);

/* XLA's CPU exp as jaxlib 0.10 emits it (every multiply-add fused, flush-to-zero and
 * denormals-are-zero). */
float sinpe_xla_expf(float x);

/* MLX's CPU exp, sin and cos (elem/fw_mlx.c); sin/cos of |x| > 2^23 are glibc's. */
float sinpe_mlx_expf(float x);
float sinpe_mlx_sinf(float x);
float sinpe_mlx_cosf(float x);

#endif
