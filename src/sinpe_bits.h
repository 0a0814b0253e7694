/* Bit patterns of floats (internal, pure C): reinterpretation without aliasing UB. */
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

#endif
