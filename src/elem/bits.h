/* Bit patterns of floats and doubles (internal, pure C): reinterpretation without
 * aliasing UB. */
#ifndef SINPE_BITS_H
#define SINPE_BITS_H

#include <stdint.h>
#include <string.h>

static inline uint32_t sinpe_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float sinpe_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* A subnormal float as a zero of its sign, anything else as it is: what MXCSR's FTZ makes of a
 * result and DAZ of an argument. */
static inline float sinpe_flush_subnormal(float x)
{
    uint32_t u = sinpe_f32_bits(x);
    return (u & 0x7f800000u) == 0 ? sinpe_bits_f32(u & 0x80000000u) : x;
}

static inline uint64_t sinpe_asuint64(double x)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline double sinpe_asdouble(uint64_t u)
{
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

#endif
