/* SLEEF's float32 sin / cos / exp as torch on 64-bit Arm computes them, re-implemented
 * bit for bit (the 'sleef' backend).
 *
 * What torch runs there (docs/numerics.md, measured under qemu): torch 2.13
 * calls SLEEF's 1.0-ULP FMA functions Sleef_{sin,cos,exp}f4_u10 (NEON, SVE128) or their
 * 8-lane form (SVE256); torch 2.15 calls the 3.5-ULP Sleef_{sin,cos}f4_u35 / f8_u35 and
 * keeps the u10 exp.  The algorithms are SLEEF's (shibatch/sleef src/libm/sleefsimdsp.c:
 * xsinf_u1, xcosf_u1, xexpf, xsinf, xcosf; the long reduction's table in
 * src/libm/rempitab.c), summarized in docs/numerics.md, and written here from published
 * descriptions of their operation order, constants and table:
 * every plain operation is its own rounded float operation (the core is built with
 * -ffp-contract=off) and every fused step is an explicit fmaf.
 *
 * Lane coupling.  SLEEF 3.5-3.9 choose the reduction per vector: one lane with |d| >= 125
 * (or NaN/inf) sends all lanes of the vector down the long path (u10: two paths; u35: a
 * second threshold, 39000, and three paths).  So a result depends on the other elements
 * of its vector, and the caller (backends/sleef.c) forms groups as torch loads them (4 or 8
 * consecutive elements from the start of each of torch's thread chunks, the last one
 * zero-padded), takes the largest path any element needs (sinpe_sleef_path) and
 * evaluates every element of the group with it.
 *
 * Range.  Every float32 input, NaN and infinities included (NaN/inf give 0xffffffff for
 * sin and cos, as SLEEF does).  Assumes round-to-nearest and no FTZ/DAZ, as SLEEF.
 * Measured: tools/sleefcheck compares with Debian's libsleef 3.5.1 and with the SLEEF that
 * torch's x86-64 wheel exports (FMA builds) over all 2^32 inputs per function and path
 * (docs/numerics.md).
 */
#include "elem/sleef.h"
#include "elem/bits.h"
#include "platform/cpu.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    float h, l;
} df; /* a double-float h + l */

/* SLEEF's constants (its sleefsimdsp.c and its helper headers), as hex floats. */
static const struct {
    float invpi;                 /* 1/pi */
    float c1, c2, c3;            /* u10 sin, path A: minus pi in three parts */
    float d1, d2, d3;            /* u10 cos, path A: the same halved */
    float a1, a2, a3;            /* u35 path A: minus pi in three parts (= c1..c3) */
    float b1, b2, b3, b4;        /* u35 sin, path B: minus pi in four parts */
    float b1h, b2h, b3h, b4h;    /* u35 cos, path B: the same halved */
    float lim_a, lim_b;          /* path thresholds: 125, 39000 */
    float hh, hl;                /* -pi/2 as a pair */
    float th, tl;                /* 2 pi as a pair */
    float small;                 /* 0.7 */
    float p1, p2, p3, p4;        /* sine polynomial */
    float l2e, n1, n2;           /* exp: log2(e), minus ln 2 in two parts */
    float q1, q2, q3, q4, q5, q6;/* exp polynomial */
    float xlo, xhi;              /* exp cuts: -104, 100 */
} K = {
    0x1.45f306p-2f,
    -0x1.921cp+1f, -0x1.daap-14f, -0x1.10b462p-29f,
    -0x1.921cp+0f, -0x1.daap-15f, -0x1.10b462p-30f,
    -0x1.921cp+1f, -0x1.daap-14f, -0x1.10b462p-29f,
    -0x1.92p+1f, -0x1.fbp-11f, -0x1.51p-21f, -0x1.0b4612p-33f,
    -0x1.92p+0f, -0x1.fbp-12f, -0x1.51p-22f, -0x1.0b4612p-34f,
    0x1.f4p+6f, 0x1.30bp+15f,
    -0x1.921fb6p+0f, 0x1.777a5cp-25f,
    0x1.921fb6p+2f, -0x1.777a5cp-23f,
    0x1.666666p-1f,
    0x1.5e150ep-19f, -0x1.9f75d6p-13f, 0x1.110eeep-7f, -0x1.55554cp-3f,
    0x1.715476p+0f, -0x1.62e4p-1f, -0x1.7f7d1cp-20f,
    0x1.a057b4p-13f, 0x1.6d2d92p-10f, 0x1.11114cp-7f, 0x1.5554f4p-5f, 0x1.555556p-3f, 0x1p-1f,
    -0x1.ap+6f, 0x1.9p+6f,
};

/* The long reduction's table: binary digits of 1/(2 pi) in four float pieces per row,
 * row r for unbiased exponents r + 25 (rows 66 and up for arguments scaled by 2^-64); row
 * 103 (zeros) is what SLEEF 3.6.1 and later read for NaN and infinities.  Bit patterns
 * from SLEEF's rempitabsp table (identical in SLEEF 3.5.1 to 3.9.0 and master). */
static const uint32_t REMPI[104][4] = {
    { 0x3e22f980, 0x335b9390, 0x2782a540, 0x9b762a0c }, /* row 0 */
    { 0x3d0be60c, 0x31dc9c88, 0x24a94fe0, 0x191d5f48 }, /* row 1 */
    { 0x3d0be60c, 0x31dc9c88, 0x24a94fe0, 0x191d5f48 }, /* row 2 */
    { 0x3b3e60dc, 0xaed8ddf4, 0xa33580f4, 0x980a82e1 }, /* row 3 */
    { 0x3b3e60dc, 0xaed8ddf4, 0xa33580f4, 0x980a82e1 }, /* row 4 */
    { 0x3b3e60dc, 0xaed8ddf4, 0xa33580f4, 0x980a82e1 }, /* row 5 */
    { 0x3b3e60dc, 0xaed8ddf4, 0xa33580f4, 0x980a82e1 }, /* row 6 */
    { 0x3a79836c, 0x2f139104, 0x23a53f84, 0x17eafa3f }, /* row 7 */
    { 0x3a79836c, 0x2f139104, 0x23a53f84, 0x17eafa3f }, /* row 8 */
    { 0x39f306dc, 0x2d9c8828, 0x2294fe14, 0x96282e0b }, /* row 9 */
    { 0x39660db8, 0x2d9c8828, 0x2294fe14, 0x96282e0b }, /* row 10 */
    { 0x38cc1b70, 0x2d9c8828, 0x2294fe14, 0x96282e0b }, /* row 11 */
    { 0x381836e4, 0x2c644150, 0x2127f09c, 0x15afa3ea }, /* row 12 */
    { 0x36c1b724, 0x2bc882a4, 0x201fc274, 0x14be8faa }, /* row 13 */
    { 0x36c1b724, 0x2bc882a4, 0x201fc274, 0x14be8faa }, /* row 14 */
    { 0x36c1b724, 0x2bc882a4, 0x201fc274, 0x14be8faa }, /* row 15 */
    { 0x36036e4c, 0x2b110548, 0x201fc274, 0x14be8faa }, /* row 16 */
    { 0x335b9390, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 17 */
    { 0x335b9390, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 18 */
    { 0x335b9390, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 19 */
    { 0x335b9390, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 20 */
    { 0x335b9390, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 21 */
    { 0x335b9390, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 22 */
    { 0x32b72720, 0x2782a540, 0x9b762a0c, 0x0efa9a6f }, /* row 23 */
    { 0x31dc9c88, 0x24a94fe0, 0x191d5f48, 0x8c2cb224 }, /* row 24 */
    { 0x31dc9c88, 0x24a94fe0, 0x191d5f48, 0x8c2cb224 }, /* row 25 */
    { 0x31393910, 0x24a94fe0, 0x191d5f48, 0x8c2cb224 }, /* row 26 */
    { 0x3064e440, 0x24a94fe0, 0x191d5f48, 0x8c2cb224 }, /* row 27 */
    { 0x3064e440, 0x24a94fe0, 0x191d5f48, 0x8c2cb224 }, /* row 28 */
    { 0x2fc9c880, 0x24a94fe0, 0x191d5f48, 0x8c2cb224 }, /* row 29 */
    { 0x2f139104, 0x23a53f84, 0x17eafa3c, 0x0ca9a6ee }, /* row 30 */
    { 0x2d9c8828, 0x2294fe14, 0x96282e08, 0x8b32c890 }, /* row 31 */
    { 0x2d9c8828, 0x2294fe14, 0x96282e08, 0x8b32c890 }, /* row 32 */
    { 0x2d9c8828, 0x2294fe14, 0x96282e08, 0x8b32c890 }, /* row 33 */
    { 0x2c644150, 0x2127f09c, 0x15afa3e8, 0x0a9a6ee0 }, /* row 34 */
    { 0x2c644150, 0x2127f09c, 0x15afa3e8, 0x0a9a6ee0 }, /* row 35 */
    { 0x2c644150, 0x2127f09c, 0x15afa3e8, 0x0a9a6ee0 }, /* row 36 */
    { 0x2bc882a4, 0x201fc274, 0x14be8fa8, 0x09537703 }, /* row 37 */
    { 0x2b110548, 0x201fc274, 0x14be8fa8, 0x09537703 }, /* row 38 */
    { 0x29882a54, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 39 */
    { 0x29882a54, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 40 */
    { 0x29882a54, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 41 */
    { 0x2782a540, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 42 */
    { 0x2782a540, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 43 */
    { 0x2782a540, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 44 */
    { 0x2782a540, 0x9b762a0c, 0x0efa9a6c, 0x03b81b6c }, /* row 45 */
    { 0x24a94fe0, 0x191d5f48, 0x8c2cb224, 0x0006db15 }, /* row 46 */
    { 0x24a94fe0, 0x191d5f48, 0x8c2cb224, 0x0006db15 }, /* row 47 */
    { 0x24a94fe0, 0x191d5f48, 0x8c2cb224, 0x0006db15 }, /* row 48 */
    { 0x24a94fe0, 0x191d5f48, 0x8c2cb224, 0x0006db15 }, /* row 49 */
    { 0x24a94fe0, 0x191d5f48, 0x8c2cb224, 0x0006db15 }, /* row 50 */
    { 0x24a94fe0, 0x191d5f48, 0x8c2cb224, 0x0006db15 }, /* row 51 */
    { 0x23a53f84, 0x17eafa3c, 0x0ca9a6ec, 0x0181b6c5 }, /* row 52 */
    { 0x23a53f84, 0x17eafa3c, 0x0ca9a6ec, 0x0181b6c5 }, /* row 53 */
    { 0x2294fe14, 0x96282e08, 0x8b32c890, 0x0006db15 }, /* row 54 */
    { 0x2294fe14, 0x96282e08, 0x8b32c890, 0x0006db15 }, /* row 55 */
    { 0x2127f09c, 0x15afa3e8, 0x0a9a6ee0, 0x0006db15 }, /* row 56 */
    { 0x2127f09c, 0x15afa3e8, 0x0a9a6ee0, 0x0006db15 }, /* row 57 */
    { 0x2127f09c, 0x15afa3e8, 0x0a9a6ee0, 0x0006db15 }, /* row 58 */
    { 0x201fc274, 0x14be8fa8, 0x09537700, 0x0006db15 }, /* row 59 */
    { 0x201fc274, 0x14be8fa8, 0x09537700, 0x0006db15 }, /* row 60 */
    { 0x1efe13ac, 0x91382b2c, 0x8508fc90, 0x800004eb }, /* row 61 */
    { 0x1efe13ac, 0x91382b2c, 0x8508fc90, 0x800004eb }, /* row 62 */
    { 0x1efe13ac, 0x91382b2c, 0x8508fc90, 0x800004eb }, /* row 63 */
    { 0x1e7c2758, 0x91382b2c, 0x8508fc90, 0x800004eb }, /* row 64 */
    { 0x1df84eb0, 0x91382b2c, 0x8508fc90, 0x800004eb }, /* row 65 */
    { 0x3d709d5c, 0x3251f534, 0x265dc0d8, 0x1b58a566 }, /* row 66 */
    { 0x3ce13abc, 0x31a3ea68, 0x265dc0d8, 0x1b58a566 }, /* row 67 */
    { 0x3c42757c, 0x308fa9a4, 0x25bb81b4, 0x1ab14acd }, /* row 68 */
    { 0x3b84eaf8, 0x308fa9a4, 0x25bb81b4, 0x1ab14acd }, /* row 69 */
    { 0x391d5f48, 0xac2cb224, 0x1e5b6294, 0x12cc9e22 }, /* row 70 */
    { 0x391d5f48, 0xac2cb224, 0x1e5b6294, 0x12cc9e22 }, /* row 71 */
    { 0x391d5f48, 0xac2cb224, 0x1e5b6294, 0x12cc9e22 }, /* row 72 */
    { 0x391d5f48, 0xac2cb224, 0x1e5b6294, 0x12cc9e22 }, /* row 73 */
    { 0x391d5f48, 0xac2cb224, 0x1e5b6294, 0x12cc9e22 }, /* row 74 */
    { 0x37eafa3c, 0x2ca9a6ec, 0x2181b6c4, 0x1615993c }, /* row 75 */
    { 0x37eafa3c, 0x2ca9a6ec, 0x2181b6c4, 0x1615993c }, /* row 76 */
    { 0x37eafa3c, 0x2ca9a6ec, 0x2181b6c4, 0x1615993c }, /* row 77 */
    { 0x3755f47c, 0x2ba69bb8, 0x1e5b6294, 0x12cc9e22 }, /* row 78 */
    { 0x36abe8f8, 0x2ba69bb8, 0x1e5b6294, 0x12cc9e22 }, /* row 79 */
    { 0x35afa3e8, 0x2a9a6ee0, 0x1e5b6294, 0x12cc9e22 }, /* row 80 */
    { 0x35afa3e8, 0x2a9a6ee0, 0x1e5b6294, 0x12cc9e22 }, /* row 81 */
    { 0x34be8fa8, 0x29537700, 0x1e5b6294, 0x12cc9e22 }, /* row 82 */
    { 0x34be8fa8, 0x29537700, 0x1e5b6294, 0x12cc9e22 }, /* row 83 */
    { 0x33fa3ea4, 0x28a6ee04, 0x1db6c528, 0x12cc9e22 }, /* row 84 */
    { 0x33fa3ea4, 0x28a6ee04, 0x1db6c528, 0x12cc9e22 }, /* row 85 */
    { 0x33747d4c, 0x279bb818, 0x1cdb14ac, 0x10c9e21d }, /* row 86 */
    { 0x32e8fa98, 0x279bb818, 0x1cdb14ac, 0x10c9e21d }, /* row 87 */
    { 0x3251f534, 0x265dc0d8, 0x1b58a564, 0x1013c439 }, /* row 88 */
    { 0x31a3ea68, 0x265dc0d8, 0x1b58a564, 0x1013c439 }, /* row 89 */
    { 0x308fa9a4, 0x25bb81b4, 0x1ab14acc, 0x0e9e21c8 }, /* row 90 */
    { 0x308fa9a4, 0x25bb81b4, 0x1ab14acc, 0x0e9e21c8 }, /* row 91 */
    { 0x2efa9a6c, 0x23b81b6c, 0x1725664c, 0x0c443904 }, /* row 92 */
    { 0x2efa9a6c, 0x23b81b6c, 0x1725664c, 0x0c443904 }, /* row 93 */
    { 0x2efa9a6c, 0x23b81b6c, 0x1725664c, 0x0c443904 }, /* row 94 */
    { 0x2efa9a6c, 0x23b81b6c, 0x1725664c, 0x0c443904 }, /* row 95 */
    { 0x2e7534dc, 0x22e06db0, 0x1725664c, 0x0c443904 }, /* row 96 */
    { 0x2dea69bc, 0xa17c9274, 0x95d4cd84, 0x8ade37df }, /* row 97 */
    { 0x2d54d374, 0x2240db60, 0x1725664c, 0x0c443904 }, /* row 98 */
    { 0x2ca9a6ec, 0x2181b6c4, 0x1615993c, 0x09872084 }, /* row 99 */
    { 0x2ba69bb8, 0x1e5b6294, 0x12cc9e20, 0x07641080 }, /* row 100 */
    { 0x2ba69bb8, 0x1e5b6294, 0x12cc9e20, 0x07641080 }, /* row 101 */
    { 0x2a9a6ee0, 0x1e5b6294, 0x12cc9e20, 0x07641080 }, /* row 102 */
    { 0x00000000, 0x00000000, 0x00000000, 0x00000000 }, /* row 103 */
};

#define bits sinpe_f32_bits
#define from_bits sinpe_bits_f32

static inline float xorsign(float x, float y)
{
    return from_bits(bits(x) ^ (bits(y) & 0x80000000u));
}

/* ---- one copy per instruction set, chosen once ----------------------------------------- */

#define FN(name) name##_generic
#include "elem/sleef_impl.h"
#undef FN

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#pragma GCC push_options
#pragma GCC target("fma")
#define FN(name) name##_fma
#include "elem/sleef_impl.h"
#undef FN
#pragma GCC pop_options
#define HAVE_FMA_COPY 1
#endif

#ifdef HAVE_FMA_COPY
static int use_fma(void)
{
    return sinpe_cpu()->fma;
}
#endif

float sinpe_sleef_expf(float d)
{
    float r;
    sinpe_sleef_exp(&d, &r, 1);
    return r;
}

void sinpe_sleef_exp(const float *in, float *out, size_t n)
{
#ifdef HAVE_FMA_COPY
    if (use_fma()) {
        exp_block_fma(in, out, n);
        return;
    }
#endif
    exp_block_generic(in, out, n);
}

int sinpe_sleef_path(sinpe_sleef_trig trig, float d)
{
    float a = fabsf(d); /* ordered compares: NaN is never below a limit */
    if (a < K.lim_a)
        return 0;
    if (trig == SINPE_SLEEF_U35 && a < K.lim_b)
        return 1;
    return trig == SINPE_SLEEF_U35 ? 2 : 1;
}

void sinpe_sleef_sincos(sinpe_sleef_trig trig, int path, const float *a, float *s, float *c,
                        size_t n)
{
#ifdef HAVE_FMA_COPY
    if (use_fma()) {
        sincos_fma(trig, path, a, s, c, n);
        return;
    }
#endif
    sincos_generic(trig, path, a, s, c, n);
}

sinpe_sleef_powf_fn sinpe_sleef_powf_for_cpu(void)
{
#ifdef HAVE_FMA_COPY
    if (use_fma())
        return powf_fma;
#endif
    return powf_generic;
}

float sinpe_sleef_powf(float x, float y, int x86)
{
    return sinpe_sleef_powf_for_cpu()(x, y, x86);
}
