/* NumPy's float32 sin, cos and exp on x86-64 CPUs with AVX2+FMA3 or AVX-512 (NumPy 2.x:
 * numpy/_core/src/umath/loops_trigonometric.dispatch.cpp, simd_sincos_f32, and
 * loops_exponent_log.dispatch.c.src, simd_exp_FLOAT; constants of npy_simd_data.h and
 * npy_math.h).  Masked loads, no scalar tail: every lane is computed alike, so one element
 * is one call here.  Both ISAs give the same bits (the AVX2 kernel scales by exponent
 * arithmetic where AVX-512 uses vscalefps; each is one rounding).
 *
 * sin/cos: NaN -> 0x7fc00000.  |x| above 117435.992 (sin) or 71476.0625 (cos), infinities
 * included: glibc's sinf/cosf (elem/glibcf.c).  Else q = rint(x * 2/pi) by the 1.5 * 2^23
 * shift, the multiply and add contracted into one FMA by GCC in the shipped build; r = x -
 * q pi/2 in three FMA steps (-0x1.921fb0p+0, -0x1.5110b4p-22, -0x1.846988p-48); cos: a
 * degree-8 even polynomial in r^2, sin: r + r^3 P(r^2) of degree 9 (FMA Horner); the
 * quadrant picks one, negated as 0 - y.  Max error 1.49 ulp (NumPy's figure).
 * exp: NaN -> 0x7fc00000; x >= 88.72283935546875 -> inf; x <= -103.97208404541015625 -> 0;
 * else q = rint(x log2 e) (multiply, add and subtract 1.5 * 2^23), r = x - q ln2 in two FMA
 * steps (-6.93145752e-1, -1.42860677e-6), exp(r) ~ P5(r) / Q2(r) (FMA Horner, one
 * division), scaled by 2^q with one rounding.  Max error 2.52 ulp (NumPy's figure).
 * Measured against float64 on every 251st bit pattern: sin 1.46, cos 1.42 ulp (|x| <=
 * 10^4), exp 2.33 ulp (x in (-87, 88.7)).
 * Verified (tools/fwcheck.py, 2026-12-02, Intel Xeon (family 6 model 167, AVX-512 incl.
 * BW/VL/FP16, AMX), 2 cores, KVM; glibc 2.36 (its FMA variants)) against numpy 2.4.6
 * np.sin/np.cos/np.exp on float32 arrays, bit for bit, NaN payloads included: specials,
 * subnormals and 1.4M values: 0 wrong each; every 64th bit pattern (67,108,864 inputs)
 * wrong: numpy-sin 0, numpy-cos 0, numpy-exp 0; all 2^32 inputs (`fwcheck.py --fn NAME
 * --all`, one core of a shared machine):
 *   numpy-cos: 4,294,967,296 inputs, 0 wrong, 216 s;
 *   numpy-exp: 4,294,967,296 inputs, 0 wrong, 252 s;
 * not yet run on all 2^32: numpy-sin.
 *
 * NumPy 1.26 and 2.0 (sinpe_numpy20_sinf/cosf; simd_sincos_f32 in
 * loops_trigonometric.dispatch.c.src, the C kernel 2.1 rewrote in C++): the same constants,
 * polynomials, thresholds and quadrant logic, but (1) the quadrant's x * 2/pi + 1.5 * 2^23 is
 * a rounded multiply, then a rounded add: that kernel is built as ISO C11, where GCC does not
 * contract, where 2.1's C++17 gets one FMA (near x * 2/pi = k + 1/2 they pick neighbouring
 * quadrants: results near +-sqrt(1/2) differ by 1 ulp, 22,928 sin and 14,486 cos inputs of
 * the 2^32); (2) a NaN is not cleared (NPY_SIMD_CMPSIGNAL is 0 on x86): it fails the range
 * test and glibc returns it quieted with its sign and payload.  Verified (2026-12-07, AMD
 * EPYC Zen 4, family 25 model 17, glibc 2.36) against numpy 2.0.2's np.sin/np.cos, all 2^32
 * float32 inputs each, with its AVX512F kernel and again its FMA3__AVX2 kernel
 * (NPY_DISABLE_CPU_FEATURES): 0 wrong; NumPy 1.26.4 gave 2.0.2's bits on the releases'
 * sweep (18.8 million inputs each).
 */
#include "elem/fwmath.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"
#include "elem/glibcf.h"

static const struct {
    float two_over_pi, pio2_hi, pio2_med, pio2_lo, magic, max_sin, max_cos;
    float cos_c[5]; /* r^8 .. r^0 */
    float sin_c[4]; /* r^9 .. r^3 */
    float log2e, ln2_hi, ln2_lo, xmax, xmin;
    float p[6]; /* p5 .. p0 */
    float q[3]; /* q2 .. q0 */
} N = {
    0x1.45f306p-1f, -0x1.921fb0p+00f, -0x1.5110b4p-22f, -0x1.846988p-48f, 0x1.800000p+23f,
    117435.992f, 71476.0625f,
    { 0x1.98e616p-16f, -0x1.6c06dcp-10f, 0x1.55553cp-05f, -0x1.000000p-01f, 0x1.000000p+00f },
    { 0x1.7d3bbcp-19f, -0x1.a06bbap-13f, 0x1.11119ap-07f, -0x1.555556p-03f },
    1.442695040888963407359924681001892137f, -6.93145752e-1f, -1.42860677e-6f,
    88.72283935546875f, -103.97208404541015625f,
    { 5.082762527590693718096e-04f, 6.757896990527504603057e-03f,
      5.114512081637298353406e-02f, 2.473615434895520810817e-01f,
      7.257664613233124478488e-01f, 9.999999999980870924916e-01f },
    { 2.159509375685829852307e-02f, -2.742335390411667452936e-01f, 1.0f },
};

static float nan_canonical(void)
{
    return sinpe_bits_f32(0x7fc00000u);
}

/* old: NumPy 1.26 and 2.0 (a NaN takes the C library's lane; the quadrant's multiply and
 * add are two roundings), else 2.1 and later. */
static float np_sincos(float x, int want_cos, int fused, int old)
{
    if (x != x && !old)
        return nan_canonical();
    if (!(fabsf(x) <= (want_cos ? N.max_cos : N.max_sin)))
        return want_cos ? sinpe_glibc_cosf(x, fused) : sinpe_glibc_sinf(x, fused);
    float q = old ? x * N.two_over_pi + N.magic : fmaf(x, N.two_over_pi, N.magic);
    q = q - N.magic;
    float r = fmaf(q, N.pio2_hi, x);
    r = fmaf(q, N.pio2_med, r);
    r = fmaf(q, N.pio2_lo, r);
    float r2 = r * r;
    float c = fmaf(N.cos_c[0], r2, N.cos_c[1]);
    c = fmaf(c, r2, N.cos_c[2]);
    c = fmaf(c, r2, N.cos_c[3]);
    c = fmaf(c, r2, N.cos_c[4]);
    float s = fmaf(N.sin_c[0], r2, N.sin_c[1]);
    s = fmaf(s, r2, N.sin_c[2]);
    s = fmaf(s, r2, N.sin_c[3]);
    s = fmaf(s, r2, 0.0f);
    s = fmaf(s, r, r);
    int32_t iq = (int32_t)q + want_cos; /* q is an integer of magnitude < 2^17 */
    float y = (iq & 1) == 0 ? s : c;
    if (iq & 2)
        y = 0.0f - y;
    return y;
}

float sinpe_numpy_sinf(float x, int fused)
{
    return np_sincos(x, 0, fused, 0);
}

float sinpe_numpy_cosf(float x, int fused)
{
    return np_sincos(x, 1, fused, 0);
}

float sinpe_numpy20_sinf(float x, int fused)
{
    return np_sincos(x, 0, fused, 1);
}

float sinpe_numpy20_cosf(float x, int fused)
{
    return np_sincos(x, 1, fused, 1);
}

float sinpe_numpy_expf(float x)
{
    if (x != x)
        return nan_canonical();
    if (x >= N.xmax)
        return INFINITY;
    if (x <= N.xmin)
        return 0.0f;
    float q = x * N.log2e;
    q = q + N.magic;
    q = q - N.magic;
    float r = fmaf(q, N.ln2_hi, x);
    r = fmaf(q, N.ln2_lo, r);
    float num = fmaf(N.p[0], r, N.p[1]);
    for (int i = 2; i < 6; i++)
        num = fmaf(num, r, N.p[i]);
    float den = fmaf(N.q[0], r, N.q[1]);
    den = fmaf(den, r, N.q[2]);
    return ldexpf(num / den, (int)q);
}
