/* Element types: their sizes, stores and in-place adds of table rows into any element type
 * and stride, position loads, and rounding (engine/store.h). */
#include "engine/store.h"

int sinpe_type_size(sinpe_type t)
{
    static const int size[SINPE_TYPE_COUNT] = { 4, 8, 2, 2, 1, 2, 4, 8, 1, 2, 4, 8 };
    return (int)t >= 0 && t < SINPE_TYPE_COUNT ? size[t] : 0;
}

static void emit_f32(const sinpe_emitter *e, char *dst, const float *pe, int64_t n)
{
    for (int64_t k = 0; k < n; k++, dst += e->cstride) {
        float v = pe[k];
        if (e->add) {
            float x;
            memcpy(&x, dst, 4);
            v = x + v;
        }
        memcpy(dst, &v, 4);
    }
}

static void emit_f64(const sinpe_emitter *e, char *dst, const float *pe, int64_t n)
{
    for (int64_t k = 0; k < n; k++, dst += e->cstride) {
        double v = (double)pe[k];
        if (e->add) {
            double x;
            memcpy(&x, dst, 8);
            v = x + v;
        }
        memcpy(dst, &v, 8);
    }
}

static void emit_half(const sinpe_emitter *e, char *dst, const float *pe, int64_t n, int bf16)
{
    for (int64_t k = 0; k < n; k++, dst += e->cstride) {
        float v = pe[k];
        if (e->add) {
            uint16_t h;
            memcpy(&h, dst, 2);
            v = (bf16 ? sinpe_bf16_to_f32(h) : sinpe_f16_to_f32(h)) + v;
        }
        uint16_t r = bf16 ? sinpe_f32_to_bf16(v) : sinpe_f32_to_f16(v);
        if (SINPE_ARM_NAN && e->add && !bf16 && v != v)
            r = 0x7fffu; /* torch on 64-bit Arm: every NaN sum (engine/store.h) */
        memcpy(dst, &r, 2);
    }
}

void sinpe_emit(const sinpe_emitter *e, char *dst, const float *pe, int64_t n)
{
    if (e->fast) { /* float32, contiguous and aligned */
        if (e->add)
            e->path->add((float *)(void *)dst, pe, (size_t)n);
        else
            memcpy(dst, pe, (size_t)n * sizeof(float));
        return;
    }
    if ((e->type == SINPE_F16 || e->type == SINPE_BF16) && e->cstride == 2 && e->path) {
        e->path->half(dst, pe, (size_t)n, e->type == SINPE_F16 ? SINPE_HALF_F16 : SINPE_HALF_BF16,
                      e->add);
        return;
    }
    switch (e->type) {
    case SINPE_F32: emit_f32(e, dst, pe, n); break;
    case SINPE_F64: emit_f64(e, dst, pe, n); break;
    case SINPE_F16: emit_half(e, dst, pe, n, 0); break;
    case SINPE_BF16: emit_half(e, dst, pe, n, 1); break;
    default: break; /* refused by sinpe_job_check */
    }
}

float sinpe_load_position(const char *p, sinpe_type t)
{
    switch (t) {
    case SINPE_F32: { float v; memcpy(&v, p, 4); return v; }
    case SINPE_F64: { double v; memcpy(&v, p, 8); return (float)v; }
    case SINPE_F16: { uint16_t v; memcpy(&v, p, 2); return sinpe_f16_to_f32(v); }
    case SINPE_BF16: { uint16_t v; memcpy(&v, p, 2); return sinpe_bf16_to_f32(v); }
    case SINPE_I8: { int8_t v; memcpy(&v, p, 1); return (float)v; }
    case SINPE_I16: { int16_t v; memcpy(&v, p, 2); return (float)v; }
    case SINPE_I32: { int32_t v; memcpy(&v, p, 4); return (float)v; }
    case SINPE_I64: { int64_t v; memcpy(&v, p, 8); return (float)v; }
    case SINPE_U8: { uint8_t v; memcpy(&v, p, 1); return (float)v; }
    case SINPE_U16: { uint16_t v; memcpy(&v, p, 2); return (float)v; }
    case SINPE_U32: { uint32_t v; memcpy(&v, p, 4); return (float)v; }
    case SINPE_U64: { uint64_t v; memcpy(&v, p, 8); return (float)v; }
    default: return 0.0f; /* refused by sinpe_job_check */
    }
}

void sinpe_round(const float *in, void *out, int64_t n, sinpe_type t)
{
    if ((int)t < 0 || t > SINPE_BF16)
        return;
    sinpe_emitter e = { t, 0, sinpe_type_size(t), 0, NULL };
    sinpe_emit(&e, out, in, n);
}
