/* Plans: a checked job as stages of items that threads share, run in steps of bounded
 * work (sinpe.h: sinpe_plan_new, sinpe_plan_step), so that a caller can check for
 * interrupts between steps.  Every job kind runs here, through its row of engine/kinds.c
 * (layout, memory, stages): tables and adds (engine/table.c), rotations (engine/rope.c),
 * maps (engine/map.c) and frequency vectors (engine/freqs.c). */
#include "engine/engine.h"

#include <stdlib.h>

#include "platform/threads.h"

/* A plan of a checked job (ctx, be: what the check found of the options), laid out. */
static sinpe_plan *layout(const sinpe_job *j, const sinpe_opts *o, const sinpe_bctx *ctx,
                          const sinpe_backend_ops *be)
{
    sinpe_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->j = *j;
    p->o = *o;
    p->ctx = *ctx;
    p->be = be;
    p->path = p->ctx.path;
    const sinpe_kind *k = sinpe_kind_of(j->kind); /* a checked job's kind */
    p->stages = k->stages;
    p->nstages = k->nstages;
    k->layout(p);
    return p;
}

/* The plan's own memory (its kind's), or the plan freed on failure. */
static int allocate(sinpe_plan *p, sinpe_plan **out)
{
    const sinpe_kind *k = sinpe_kind_of(p->j.kind);
    int st = k->alloc ? k->alloc(p) : SINPE_OK;
    if (st != SINPE_OK) {
        sinpe_plan_free(p);
        return st;
    }
    *out = p;
    return SINPE_OK;
}

int sinpe_plan_new(const sinpe_job *j, const sinpe_opts *o, sinpe_plan **out)
{
    if (!out)
        return SINPE_E_NULL;
    *out = NULL;
    sinpe_bctx ctx;
    const sinpe_backend_ops *be;
    int st = sinpe_job_checked(j, o, 0, &ctx, &be);
    if (st != SINPE_OK)
        return st;
    sinpe_plan *p = layout(j, o, &ctx, be);
    return p ? allocate(p, out) : SINPE_E_NOMEM;
}

int sinpe_plan_prepare(sinpe_job *j, const sinpe_opts *o, sinpe_plan **out)
{
    if (!out)
        return SINPE_E_NULL;
    *out = NULL;
    sinpe_bctx ctx;
    const sinpe_backend_ops *be;
    int st = sinpe_job_complete_check(j, o, &ctx, &be);
    if (st != SINPE_OK)
        return st;
    sinpe_plan *p = layout(j, o, &ctx, be);
    if (!p)
        return SINPE_E_NOMEM;
    const sinpe_array *x = &j->dst;
    int64_t bytes = sinpe_plan_bytes(p, sinpe_kind_of(j->kind)); /* scratch, slots, plan */
    st = sinpe_admit(j->fresh ? x->ndim : -1, x->shape, x->type, bytes, NULL);
    if (st != SINPE_OK) {
        sinpe_plan_free(p);
        return st;
    }
    return allocate(p, out);
}

int sinpe_plan_bind(sinpe_plan *p, void *data, const int64_t *strides)
{
    if (!p || !strides || !p->j.fresh)
        return SINPE_E_NULL;
    sinpe_array *x = &p->j.dst;
    if (sinpe_elements(x->ndim, x->shape) == 0) { /* nothing is written: any strides (NumPy's are 0) */
        x->data = data;
        return SINPE_OK;
    }
    if (!data)
        return SINPE_E_NULL;
    if ((uintptr_t)data % (uintptr_t)sinpe_type_size(x->type) != 0)
        return SINPE_E_SHAPE;
    for (int k = 0; k < x->ndim; k++) /* the layout the plan was made for: C order */
        if (x->shape[k] > 1 && strides[k] != x->strides[k])
            return SINPE_E_SHAPE;
    x->data = data;
    const sinpe_kind *k = sinpe_kind_of(p->j.kind); /* its scratch placed for the data */
    if (k->bind)
        k->bind(p);
    return SINPE_OK;
}

void sinpe_plan_free(sinpe_plan *p)
{
    if (p) {
        const sinpe_kind *k = sinpe_kind_of(p->j.kind);
        if (k && k->release)
            k->release(p);
        free(p->mem);
        free(p);
    }
}

typedef struct {
    sinpe_plan *p;
    const sinpe_stage *stage;
    int64_t first;
} step_ctx;

static void step_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    step_ctx *s = ctx;
    for (int64_t i = s->first + begin; i < s->first + end; i++)
        s->stage->run(s->p, i, tid);
}

static void skip_finished(sinpe_plan *p)
{
    while (p->stage < p->nstages && p->next >= p->stages[p->stage].items(p)) {
        p->stage++;
        p->next = 0;
    }
}

int sinpe_plan_step(sinpe_plan *p, int64_t budget, int *done)
{
    if (!p || !done)
        return SINPE_E_NULL;
    skip_finished(p);
    if (p->stage < p->nstages) {
        const sinpe_stage *sg = &p->stages[p->stage];
        int64_t n = sg->items(p), per = sg->work(p);
        per = per > 0 ? per : 1; /* an empty item still counts one unit */
        int64_t k = budget / per > 0 ? budget / per : 1;
        if (k > n - p->next)
            k = n - p->next;
        int64_t min_items = SINPE_MIN_THREAD_WORK / per > 0 ? SINPE_MIN_THREAD_WORK / per : 1;
        step_ctx s = { p, sg, p->next };
        sinpe_parallel_for(k, min_items, p->nslots, step_task, &s);
        p->next += k;
        skip_finished(p);
    }
    *done = p->stage == p->nstages;
    return SINPE_OK;
}

int sinpe_run(sinpe_job *j, const sinpe_opts *o)
{
    sinpe_plan *p;
    int st = sinpe_plan_prepare(j, o, &p);
    if (st != SINPE_OK)
        return st;
    if (j->fresh) { /* the caller allocates a fresh destination */
        sinpe_plan_free(p);
        return SINPE_E_NULL;
    }
    int done = 0;
    while (st == SINPE_OK && !done)
        st = sinpe_plan_step(p, INT64_MAX, &done);
    sinpe_plan_free(p);
    return st;
}
