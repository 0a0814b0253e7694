/* Frequency vectors of the presets (sinpe.h: FREQS jobs): a few float32 (or float64) steps
 * per element, with the exp and pow of the call's backend, in blocks of elements placed in
 * the tensor torch would evaluate (SLEEF's vectors and torch.pow's split between SLEEF and the
 * C library depend on where an element lies).
 */
#include "engine/engine.h"

#include <math.h>

#include "elem/glibcf.h"

/* A FREQS job's rules: its description, its base, the vector's type and length. */
int sinpe_freq_check(const sinpe_job *j)
{
    const sinpe_freq *f = j->freq;
    if (!f)
        return SINPE_E_NULL;
    if ((int)f->kind < 0 || f->kind >= SINPE_FREQ_COUNT)
        return SINPE_E_FUNC;
    if (f->group < 1)
        return SINPE_E_PRESET;
    if ((f->kind == SINPE_FREQ_POW || f->kind == SINPE_FREQ_POW64 || f->kind == SINPE_FREQ_EXP_LOG)
        && (sinpe_check_base(f->base64) != SINPE_OK || sinpe_check_base(f->base) != SINPE_OK))
        return SINPE_E_BASE; /* also a base that float32 rounds to 0 or inf */
    if (j->rows < 0)
        return SINPE_E_ROWS;
    const sinpe_array *x = &j->dst;
    if (x->type != (f->kind == SINPE_FREQ_POW64 ? SINPE_F64 : SINPE_F32))
        return SINPE_E_TYPE;
    if (x->ndim != 1 || x->shape[0] != j->rows)
        return SINPE_E_SHAPE;
    if (j->rows > ((int64_t)1 << 60) / 8)
        return SINPE_E_SIZE;
    return SINPE_OK;
}

/* A fresh result: a vector of j->rows. */
int sinpe_freq_fresh(sinpe_job *j)
{
    j->dst.ndim = 1;
    j->dst.shape[0] = j->rows;
    return SINPE_OK;
}

/* The plan: the elements, torch's tensor (the vector), the threads. */
void sinpe_freq_layout(sinpe_plan *p)
{
    p->count = p->j.rows;
    p->ctx.tensor_len = p->ctx.exp_len = p->count;
    p->ctx.exp_ndim = 1;
    p->ctx.exp_last = p->count;
    p->nslots = p->o.threads;
}

static float k_of(const sinpe_freq *f, int64_t i)
{
    return (float)(f->start + f->step * (i / f->group));
}

static void freq_run(sinpe_plan *p, int64_t item, int tid)
{
    (void)tid;
    const sinpe_freq *f = p->j.freq;
    int64_t e0 = item * SINPE_BLOCK;
    int64_t n = p->count - e0 < SINPE_BLOCK ? p->count - e0 : SINPE_BLOCK;
    if (f->kind == SINPE_FREQ_POW64) {
        double *d = (double *)p->j.dst.data + e0;
        for (int64_t i = 0; i < n; i++) {
            double v = pow(f->base64, (double)(f->start + f->step * ((e0 + i) / f->group)) / f->b64);
            d[i] = f->recip ? 1.0 / v : v;
        }
        return;
    }
    float *out = (float *)p->j.dst.data + e0;
    if (f->kind == SINPE_FREQ_POW) {
        for (int64_t i = 0; i < n; i++)
            out[i] = f->a != 0.0f ? k_of(f, e0 + i) * f->a : k_of(f, e0 + i) / f->b; /* in place */
        p->be->pow(&p->ctx, f->base, out, out, e0, n);
        if (f->recip)
            for (int64_t i = 0; i < n; i++)
                out[i] = 1.0f / out[i];
        return;
    }
    float arg[SINPE_BLOCK] = { 0.0f }; /* (GCC cannot see that n >= 1) */
    float a = f->kind == SINPE_FREQ_EXP_LOG ? sinpe_glibc_logf(f->base, 1) / f->b : f->a;
    for (int64_t i = 0; i < n; i++) {
        float v = k_of(f, e0 + i) * a;
        arg[i] = f->kind == SINPE_FREQ_EXP_MULDIV ? v / f->b : v;
    }
    p->be->exp(&p->ctx, e0, arg, out, (size_t)n);
    if (f->kind == SINPE_FREQ_EXP_MUL)
        for (int64_t i = 0; i < n; i++)
            out[i] = f->m * out[i];
}

const sinpe_stage sinpe_freq_stages[1] = {
    { .items = sinpe_block_items, .work = sinpe_block_work, .run = freq_run },
};
