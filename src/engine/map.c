/* Elementwise maps (sinpe.h: MAP jobs): exp, sin or cos of each float32 element of a C-order
 * source with the call's backend (log: glibc's on every backend), in blocks of elements placed in the tensor torch would
 * evaluate (SLEEF's vectors depend on where an element lies). */
#include "engine/engine.h"

#include <string.h>

#include "elem/glibcf.h"

/* A MAP's rules: a function, a float32 source and destination of one shape, both in C order. */
int sinpe_map_check(const sinpe_job *j)
{
    const sinpe_array *s = &j->src, *x = &j->dst;
    if ((int)j->func < 0 || j->func >= SINPE_FN_COUNT)
        return SINPE_E_FUNC;
    if (x->type != SINPE_F32 || s->type != SINPE_F32)
        return SINPE_E_TYPE;
    if (s->ndim != x->ndim || memcmp(s->shape, x->shape, (size_t)x->ndim * sizeof(int64_t)))
        return SINPE_E_SHAPE;
    if (sinpe_bytes_of(x->ndim, x->shape, 4) < 0)
        return SINPE_E_SIZE;
    if (sinpe_elements(s->ndim, s->shape) == 0) /* nothing to map: an empty array's strides say nothing */
        return SINPE_OK;
    sinpe_array c = *s;
    sinpe_c_order(&c);
    for (int k = 0; k < s->ndim; k++) /* both in C order */
        if (s->shape[k] > 1 && (s->strides[k] != c.strides[k] || x->strides[k] != c.strides[k]))
            return SINPE_E_SHAPE;
    return s->data ? SINPE_OK : SINPE_E_NULL;
}

/* A fresh result has the source's shape. */
int sinpe_map_fresh(sinpe_job *j)
{
    sinpe_array *x = &j->dst;
    x->ndim = j->src.ndim < 0 || j->src.ndim > SINPE_MAX_DIMS ? 0 : j->src.ndim;
    memcpy(x->shape, j->src.shape, (size_t)x->ndim * sizeof(int64_t));
    return SINPE_OK;
}

/* Element e of the tensor torch evaluates: the source's (the backends' argument function). */
static float map_argument(const void *plan, int64_t element)
{
    const sinpe_plan *p = plan;
    return ((const float *)p->j.src.data)[element];
}

/* The plan: the elements, torch's tensor (the destination's), the threads. */
void sinpe_map_layout(sinpe_plan *p)
{
    p->count = sinpe_elements(p->j.dst.ndim, p->j.dst.shape);
    p->ctx.tensor_len = p->ctx.exp_len = p->count;
    p->ctx.exp_ndim = p->j.dst.ndim;
    p->ctx.exp_last = p->j.dst.ndim > 0 ? p->j.dst.shape[p->j.dst.ndim - 1] : 1;
    p->ctx.argument = map_argument;
    p->ctx.src = p;
    p->nslots = p->o.threads;
}

static void map_run(sinpe_plan *p, int64_t item, int tid)
{
    (void)tid;
    int64_t e0 = item * SINPE_BLOCK;
    size_t n = (size_t)(p->count - e0 < SINPE_BLOCK ? p->count - e0 : SINPE_BLOCK);
    const float *in = (const float *)p->j.src.data + e0;
    float *r = (float *)p->j.dst.data + e0; /* C order (the check) */
    switch (p->j.func) {
    case SINPE_FN_EXP: p->be->exp(&p->ctx, e0, in, r, n); break;
    case SINPE_FN_SIN: p->be->sincos(&p->ctx, e0, in, r, NULL, n); break;
    case SINPE_FN_LOG:
        for (size_t i = 0; i < n; i++)
            r[i] = sinpe_glibc_logf(in[i], 1);
        break;
    default: p->be->sincos(&p->ctx, e0, in, NULL, r, n); break;
    }
}

const sinpe_stage sinpe_map_stages[1] = {
    { .items = sinpe_block_items, .work = sinpe_block_work, .run = map_run },
};
