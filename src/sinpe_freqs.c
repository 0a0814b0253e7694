/* Frequency vectors of the presets (sinpe_core.h: sinpe_freqs): a few float32 (or
 * float64) steps per element, with exp and pow of the call's backend.
 *
 * pow on the backends that give torch's bits follows torch.pow on the CPU: SLEEF's u10
 * powf for the whole pairs of vectors of each thread chunk and the C library's powf for
 * the rest (sinpe_powf.c); on x86-64 that rest is this process's own powf, as torch's
 * std::pow is; the 'sleef' backend (torch on 64-bit Arm, reproduced anywhere) uses
 * glibc's powf re-implemented in its fused form, as AArch64's glibc runs it.
 */
#include "sinpe_core.h"

#include <math.h>
#include <stdlib.h>

#include "sinpe_powf.h"

#define FREQ_BLOCK 1024

static float k_of(const sinpe_freq *f, int64_t i)
{
    return (float)(f->start + f->step * (i / f->group));
}

static int exp_kinds(const sinpe_freq *f, float *out, int64_t n, const sinpe_opts *o)
{
    float arg[FREQ_BLOCK];
    for (int64_t i0 = 0; i0 < n; i0 += FREQ_BLOCK) {
        int64_t m = n - i0 < FREQ_BLOCK ? n - i0 : FREQ_BLOCK;
        for (int64_t i = 0; i < m; i++) {
            float v = k_of(f, i0 + i) * f->a;
            arg[i] = f->kind == SINPE_FREQ_EXP_MULDIV ? v / f->b : v;
        }
        int st = sinpe_map(0, arg, out + i0, (size_t)m, o);
        if (st != SINPE_OK)
            return st;
        if (f->kind == SINPE_FREQ_EXP_MUL)
            for (int64_t i = 0; i < m; i++)
                out[i0 + i] = f->m * out[i0 + i];
    }
    return SINPE_OK;
}

static void pow_kind(const sinpe_freq *f, float *out, int64_t n, const sinpe_opts *o)
{
    /* one call over the whole vector: torch's SLEEF/C-library split depends on where each
     * element lies in its thread chunk */
    int sleef = o->backend == SINPE_BACKEND_SLEEF;
    sinpe_pow_profile prof = { sleef ? o->sleef.lanes : f->pow_lanes, o->backend != SINPE_BACKEND_SLEEF,
                               o->backend == SINPE_BACKEND_SLEEF ? 1 : sinpe_glibc_powf_fused(),
                               o->backend != SINPE_BACKEND_SLEEF,
                               o->backend == SINPE_BACKEND_SLEEF ? o->sleef.torch_threads : 1 };
    for (int64_t i = 0; i < n; i++)
        out[i] = k_of(f, i) / f->b; /* the exponents, in place */
    if (o->backend == SINPE_BACKEND_BUILTIN) {
        for (int64_t i = 0; i < n; i++)
            out[i] = sinpe_powf_cr(f->base, out[i]);
    } else {
        sinpe_torch_powf(&f->base, 0, out, out, n, &prof);
    }
    if (f->recip)
        for (int64_t i = 0; i < n; i++)
            out[i] = 1.0f / out[i];
}

int sinpe_freqs(const sinpe_freq *f, void *out, int64_t n, const sinpe_opts *o)
{
    if (!f || !o)
        return SINPE_E_NULL;
    if (n < 0)
        return SINPE_E_ROWS;
    if (n > 0 && !out)
        return SINPE_E_NULL;
    if ((int)f->kind < 0 || f->kind >= SINPE_FREQ_COUNT || f->group < 1 || f->pow_lanes < 0)
        return SINPE_E_SPEC;
    float probe = 0.0f;
    int st = sinpe_map(0, &probe, &probe, 1, o); /* the options' checks */
    if (st != SINPE_OK)
        return st;
    switch (f->kind) {
    case SINPE_FREQ_EXP_MUL:
    case SINPE_FREQ_EXP_MULDIV:
        return exp_kinds(f, out, n, o);
    case SINPE_FREQ_POW:
        pow_kind(f, out, n, o);
        return SINPE_OK;
    default: { /* POW64 */
        double *d = out;
        for (int64_t i = 0; i < n; i++) {
            double v = pow(f->base64, (double)(f->start + f->step * (i / f->group)) / f->b64);
            d[i] = f->recip ? 1.0 / v : v;
        }
        return SINPE_OK;
    }
    }
}
