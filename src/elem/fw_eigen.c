/* Eigen's float sin, cos and exp packets (Eigen/src/Core/arch/Default/
 * GenericPacketMathFunctions.h: psincos_float, pexp_float, trig_reduce_huge) as TensorFlow
 * 2.21 pins them (Eigen commit 3d9051ea) and ONNX Runtime 1.32 runs its sin/cos; built
 * without FMA there, so each pmadd is a multiply, then an add (two roundings).  Every lane
 * is independent of the others, so one element is one call.
 *
 * sin/cos: a = |x|; y = a * 2/pi (float), rounded by adding and subtracting 2^23 + 2^22
 * (the integer's low bits are the quadrant); r = a - y pi/2 in four steps (-1.5703125,
 * -0.000483989715576171875, 1.62865035235881805419921875e-07,
 * 5.5644315544167710640977020375430583953857421875e-11).  a >= 25966 (sin) or 18838 (cos),
 * finite: Payne-Hanek with 2/pi to 192 bits in 2.62 fixed point, r = (p - q) pi/2 * 2^-62
 * in double, rounded to float.  cos poly 1 - x^2/2 + ... (degree 8), sin x + x^3 P(x^2)
 * (degree 7); the quadrant's low bit picks one, bit 1 (and x's sign for sin) the sign bit.
 * exp: x < -104 -> 0; m = floor(min(x, 88.723) log2 e + 1/2); r = x - m ln2 in two steps
 * (-0.693359375, 2.12194440e-4); degree-6 polynomial (even and odd halves); scaled by 2^m
 * exactly (one rounding), then max(result, x) (infinities).
 * ftz: TensorFlow runs with MXCSR's FTZ and DAZ: subnormal inputs count as zero and
 * subnormal results are flushed to zero (signed).
 * Error against float64 on every 251st bit pattern: sin 2.26, cos 2.24 ulp (|x| <= 10^4),
 * exp 1.26 ulp (x in (-87, 88.7)).
 * Verified (tools/fwcheck.py, 2026-12-02, Intel Xeon (family 6 model 167, AVX-512 incl.
 * BW/VL/FP16, AMX), 2 cores, KVM; glibc 2.36 (its FMA variants)) against tensorflow-cpu
 * 2.21.0 tf.math.sin/cos/exp eager (ftz=1) and onnxruntime 1.32.0 Sin/Cos nodes (ftz=0),
 * lengths multiples of 8 and 4 (the tails: glibc, checked apart), bit for bit, NaN payloads
 * included: specials, subnormals and 1.4M values: 0 wrong each; every 64th bit pattern
 * (67,108,864 inputs) wrong: tf-sin 0, tf-cos 0, tf-exp 0, ort-sin 0, ort-cos 0; all 2^32
 * inputs (`fwcheck.py --fn NAME --all`, one core of a shared machine):
 *   tf-sin: 4,294,967,296 inputs, 0 wrong, 340 s;
 *   tf-cos: 4,294,967,296 inputs, 0 wrong, 178 s;
 *   tf-exp: 4,294,967,296 inputs, 0 wrong, 404 s;
 *   ort-sin: 4,294,967,296 inputs, 0 wrong, 299 s;
 *   ort-cos: 4,294,967,296 inputs, 0 wrong, 328 s.
 */
#include "elem/fwmath.h"

#include <math.h>
#include <stdint.h>

#include "elem/bits.h"

static const struct {
    float two_over_pi, magic;
    float pio2[4];
    float huge_sin, huge_cos;
    float cos_c[5]; /* x^8 .. x^0 */
    float sin_c[3]; /* x^7 .. x^3 */
    double pio2_62;
    uint32_t two_over_pi_bits[26];
    float exp_hi, exp_lo, log2e, ln2_c1, ln2_c2, p2, p3, p4, p5, p6;
} E = {
    0.636619746685028076171875f, 12582912.0f,
    { -1.5703125f, -0.000483989715576171875f, 1.62865035235881805419921875e-07f,
      5.5644315544167710640977020375430583953857421875e-11f },
    25966.0f, 18838.0f,
    { 2.4372266125283204019069671630859375e-05f, -0.00138865201734006404876708984375f,
      0.041666619479656219482421875f, -0.5f, 1.0f },
    { -0.0001959234114083702898469196984621021329076029360294342041015625f,
      0.0083326873655616851693794799871284340042620897293090820312500000f,
      -0.1666666203982298255503735617821803316473960876464843750000000000f },
    3.4061215800865545e-19,
    { 0x00000028, 0x000028be, 0x0028be60, 0x28be60db, 0xbe60db93, 0x60db9391, 0xdb939105,
      0x9391054a, 0x91054a7f, 0x054a7f09, 0x4a7f09d5, 0x7f09d5f4, 0x09d5f47d, 0xd5f47d4d,
      0xf47d4d37, 0x7d4d3770, 0x4d377036, 0x377036d8, 0x7036d8a5, 0x36d8a566, 0xd8a5664f,
      0xa5664f10, 0x664f10e4, 0x4f10e410, 0x10e41000, 0xe4100000 },
    88.723f, -104.0f, 1.44269504088896341f, -0.693359375f, 2.12194440e-4f,
    0.49999988079071044921875f, 0.16666518151760101318359375f,
    4.166965186595916748046875e-2f, 8.36894474923610687255859375e-3f,
    1.37449637986719608306884765625e-3f,
};


/* Payne-Hanek for finite a >= the threshold: r, and the quadrant in *q. */
static float reduce_huge(float a, int32_t *q)
{
    uint32_t xi = sinpe_f32_bits(a);
    uint32_t e = (xi >> 23) - 118;
    xi = ((xi & 0x007fffffu) | 0x00800000u) << (e & 0x7);
    uint32_t i = e >> 3;
    uint32_t t1 = E.two_over_pi_bits[i - 1];
    uint32_t t2 = E.two_over_pi_bits[i + 3];
    uint32_t t3 = E.two_over_pi_bits[i + 7];
    uint64_t p = (uint64_t)xi * t3;
    p = (uint64_t)xi * t2 + (p >> 32);
    p = ((uint64_t)(uint32_t)(xi * t1) << 32) + p;
    uint64_t n = (p + ((uint64_t)1 << 61)) >> 62;
    *q = (int32_t)n;
    p -= n << 62;
    return (float)((double)(int64_t)p * E.pio2_62);
}

static float eigen_sincos(float x, int want_cos, int ftz)
{
    float xin = ftz ? sinpe_flush_subnormal(x) : x;
    float a = fabsf(xin);
    float y = a * E.two_over_pi;
    float yr = y + E.magic;
    int32_t yi = (int32_t)sinpe_f32_bits(yr);
    y = yr - E.magic;
    float r = y * E.pio2[0] + a;
    r = y * E.pio2[1] + r;
    r = y * E.pio2[2] + r;
    r = y * E.pio2[3] + r;
    if (a >= (want_cos ? E.huge_cos : E.huge_sin) && isfinite(a))
        r = reduce_huge(a, &yi);
    uint32_t sign = want_cos ? (((uint32_t)yi + 1u) << 30) /* unsigned: a NaN's yi is INT32_MAX */
                              : (sinpe_f32_bits(xin) ^ ((uint32_t)yi << 30));
    sign &= 0x80000000u;
    float r2 = r * r;
    if (ftz)
        r2 = sinpe_flush_subnormal(r2);
    float c = E.cos_c[0] * r2 + E.cos_c[1];
    c = c * r2 + E.cos_c[2];
    c = c * r2 + E.cos_c[3];
    c = c * r2 + E.cos_c[4];
    float s = E.sin_c[0] * r2 + E.sin_c[1];
    s = s * r2 + E.sin_c[2];
    s = s * r2;
    s = s * r + r;
    int sin_poly = (yi & 1) == 0;
    float res = (sin_poly != want_cos) ? s : c;
    res = sinpe_bits_f32(sinpe_f32_bits(res) ^ sign);
    return ftz ? sinpe_flush_subnormal(res) : res;
}

float sinpe_eigen_sinf(float x, int ftz)
{
    return eigen_sincos(x, 0, ftz);
}

float sinpe_eigen_cosf(float x, int ftz)
{
    return eigen_sincos(x, 1, ftz);
}

float sinpe_eigen_expf(float x, int ftz)
{
    float xin = ftz ? sinpe_flush_subnormal(x) : x;
    if (xin < E.exp_lo)
        return 0.0f;
    float xc = xin < E.exp_hi ? xin : (xin != xin ? xin : E.exp_hi);
    float m = floorf(xc * E.log2e + 0.5f);
    float r = m * E.ln2_c1 + xc;
    r = m * E.ln2_c2 + r;
    float r2 = r * r;
    float pe = r2 * E.p6 + E.p4;
    float po = r2 * E.p5 + E.p3;
    pe = r2 * pe + E.p2;
    float pl = r + 1.0f;
    float y = r * po + pe;
    y = r2 * y + pl;
    float res = (m != m) ? y : ldexpf(y, (int)m);
    if (ftz)
        res = sinpe_flush_subnormal(res);
    return res > xin ? res : (xin != xin ? res : xin);
}
