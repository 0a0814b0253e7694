/* ONNX Runtime's float exp: MLAS's MlasComputeExpVector (onnxruntime/core/mlas/lib/
 * compute.cpp, constants MlasExpConstants; the FMA3 and AVX-512F kernels run the same
 * steps fused).  Lane-independent.
 *
 * x clamped to [-103.9720840454, 88.7762626647950]; biased = x log2 e + 1.5 * 2^23 (fused),
 * m = biased - 1.5 * 2^23; r = x - m ln2 in two steps (-6.93145752e-1, -1.42860677e-6);
 * the scale 2^m split as 2^mn * 2^mo with mn = m clamped to [-126, 127] (both built from the
 * integer bits); p = degree-5 Horner to 1 (0x1.694000p-10 .. 0x1.fffff6p-2, 1);
 * result = (p * (r * 2^mo) + 2^mo) * 2^mn, the last step being exp(r)'s constant term
 * merged with the overflow scale (XNNPACK's two-piece reconstruction).
 * `fused`: every multiply-add as one FMA (FMA3 / AVX-512 CPUs), else multiply then add.
 * Error against float64 exp on every 251st bit pattern in (-87, 88.7): 0.84 ulp (fused).
 * Verified (tools/fwcheck.py, 2026-12-02, Intel Xeon (family 6 model 167, AVX-512 incl.
 * BW/VL/FP16, AMX), 2 cores, KVM; glibc 2.36 (its FMA variants)) against onnxruntime 1.32.0
 * Exp node (fused=1), bit for bit, NaN payloads included: specials, subnormals and 1.4M
 * values: 0 wrong each; every 64th bit pattern (67,108,864 inputs) wrong: ort-exp 0; all
 * 2^32 inputs (`fwcheck.py --fn NAME --all`, one core of a shared machine):
 *   ort-exp: 4,294,967,296 inputs, 0 wrong, 515 s.
 */
#include "elem/fwmath.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"

static const struct {
    float lo, hi, bias, log2e, ln2_hi, ln2_lo;
    float p[6];
    int32_t min_exp, max_exp;
} M = {
    -103.9720840454f, 88.7762626647950f, 12582912.0f, 1.44269504088896341f,
    -6.93145752e-1f, -1.42860677e-6f,
    { 0x1.694000p-10f, 0x1.125edcp-7f, 0x1.555b5ap-5f, 0x1.555450p-3f, 0x1.fffff6p-2f,
      0x1.000000p+0f },
    (int32_t)0xC1000000, (int32_t)0x3F800000,
};

static inline float madd(float a, float b, float c, int fused)
{
    return fused ? fmaf(a, b, c) : a * b + c;
}

float sinpe_mlas_expf(float x, int fused)
{
    float v = x;
    if (v > M.hi)
        v = M.hi;
    if (v < M.lo)
        v = M.lo;
    float biased = madd(v, M.log2e, M.bias, fused);
    float m = biased - M.bias;
    v = madd(m, M.ln2_hi, v, fused);
    v = madd(m, M.ln2_lo, v, fused);
    int32_t over = (int32_t)(sinpe_f32_bits(biased) << 23);
    int32_t normal = over;
    if (normal > M.max_exp)
        normal = M.max_exp;
    if (normal < M.min_exp)
        normal = M.min_exp;
    over = (int32_t)((uint32_t)over - (uint32_t)normal + (uint32_t)M.max_exp);
    normal = (int32_t)((uint32_t)normal + (uint32_t)M.max_exp);
    float p = M.p[0];
    for (int i = 1; i < 6; i++)
        p = madd(p, v, M.p[i], fused);
    float so = sinpe_bits_f32((uint32_t)over), sn = sinpe_bits_f32((uint32_t)normal);
    v = v * so;
    p = madd(p, v, so, fused);
    return p * sn;
}
