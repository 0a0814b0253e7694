/* Plans: a checked job as stages of items that threads share, run in steps of bounded
 * work (sinpe.h: sinpe_plan_new, sinpe_plan_step), so that a caller can check for
 * interrupts between steps.  Every job kind runs here: tables and adds (engine/tiles.c),
 * rotations (engine/rope.c), maps and frequency vectors (engine/freqs.c). */
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "platform/threads.h"

static float map_argument(const void *plan, int64_t element)
{
    const sinpe_plan *p = plan;
    return ((const float *)p->j.src.data)[element];
}

/* A table's or an add's plan laid out: geometry, threads, the backend's view; nothing
 * allocated. */
void sinpe_table_layout(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    p->c = (float)(-log(j->base) / (double)j->dst.shape[j->dst.ndim - 1]);
    p->npos = sinpe_positions_alias(j) ? sinpe_elements(j->dst.ndim - 1, j->dst.shape) : 0;
    p->pos = j->pos.at.data;
    sinpe_table_geometry(p);
    p->nslots = (int)sinpe_table_threads(p);
    p->ctx.argument = sinpe_table_argument;
    p->ctx.src = p;
}

int64_t sinpe_plan_scratch_bytes(const sinpe_plan *p)
{
    int64_t nf = sinpe_kind_of(p->j.kind)->table ? sinpe_table_scratch_floats(p) : 0;
    return nf * (int64_t)sizeof(float) + p->nslots * (int64_t)sizeof(sinpe_slot)
           + (int64_t)sizeof(sinpe_plan);
}

/* A table's memory: the preset's program, the slots, then the floats (slots are a multiple
 * of 8 bytes). */
int sinpe_table_alloc(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    if (j->preset && sinpe_preset_compile(j->preset, j->preset->ncol, p->be->independent,
                                          &p->prog) != SINPE_OK)
        return SINPE_E_NOMEM;
    int64_t nf = sinpe_table_scratch_floats(p);
    if (nf > 0) {
        size_t head = (size_t)p->nslots * sizeof(sinpe_slot);
        if ((uint64_t)nf > (SIZE_MAX - head) / sizeof(float)
            || !(p->mem = malloc(head + (size_t)nf * sizeof(float))))
            return SINPE_E_NOMEM;
        p->slots = p->mem;
        sinpe_table_scratch_assign(p, (float *)(void *)((char *)p->mem + head));
    }
    return SINPE_OK;
}

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

void sinpe_map_layout(sinpe_plan *p)
{
    p->count = sinpe_elements(p->j.dst.ndim, p->j.dst.shape);
    p->ctx.tensor_len = p->ctx.exp_len = p->count;
    p->ctx.exp_ndim = p->j.dst.ndim;
    p->ctx.argument = map_argument;
    p->ctx.src = p;
    p->nslots = p->o.threads;
}

void sinpe_freq_layout(sinpe_plan *p)
{
    p->count = p->j.rows;
    p->ctx.tensor_len = p->ctx.exp_len = p->count;
    p->ctx.exp_ndim = 1;
    p->nslots = p->o.threads;
}

/* The plan's own memory (tables and adds only), or the plan freed on failure. */
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
    st = sinpe_admit(j->fresh ? x->ndim : -1, x->shape, x->type, sinpe_plan_scratch_bytes(p), NULL);
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
    if (p->mem) /* the slots' rows aligned like the data */
        sinpe_table_scratch_assign(p, (float *)(void *)((char *)p->mem
                                                         + (size_t)p->nslots * sizeof(sinpe_slot)));
    return SINPE_OK;
}

void sinpe_plan_free(sinpe_plan *p)
{
    if (p) {
        sinpe_preset_prog_free(&p->prog);
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
