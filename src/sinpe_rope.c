/* Rotary position embedding applied in place (sinpe_core.h: sinpe_rope).
 *
 * One pass over x: each vector along the last axis is read, rotated with its position's
 * row of the cos/sin tables and written back, in torch's order of operations and
 * roundings for the two conventions (transformers' halves, rotary-embedding-torch's
 * pairs).  The core is built with -ffp-contract=off: every product and sum below is its
 * own rounded operation, as torch's separate eager kernels are.
 */
#include "sinpe_core.h"

#include <string.h>

#include "sinpe_layout.h"
#include "sinpe_store.h"
#include "sinpe_threads.h"

#define ROPE_MIN_VECTORS 256 /* per thread, about 64 KB of work */

int sinpe_rope_check(const sinpe_rope *r)
{
    if (!r)
        return SINPE_E_NULL;
    if ((int)r->type < 0 || r->type > SINPE_BF16)
        return SINPE_E_TYPE;
    int nd = r->ndim;
    if (nd < 2 || nd > SINPE_MAX_DIMS || r->seq_axis < 0 || r->seq_axis >= nd - 1
        || r->batch_axis < -1 || r->batch_axis >= nd - 1 || r->batch_axis == r->seq_axis)
        return SINPE_E_DIMS;
    for (int k = 0; k < nd; k++)
        if (r->shape[k] < 0)
            return SINPE_E_ROWS;
    int64_t d = r->shape[nd - 1];
    if (r->rot < 0 || r->rot % 2 || r->rot > d)
        return SINPE_E_DMODEL;
    if (r->tables < 1 || (r->tables > 1 && (r->batch_axis < 0 || r->shape[r->batch_axis] != r->tables)))
        return SINPE_E_SPEC;
    int st = sinpe_overlap_check(nd, r->shape, r->strides, sinpe_type_size(r->type));
    if (st != SINPE_OK)
        return st;
    int64_t n = 1;
    for (int k = 0; k < nd; k++)
        n = r->shape[k] == 0 ? 0 : n * r->shape[k];
    if (n > 0 && (!r->data || !r->cos || !r->sin))
        return SINPE_E_NULL;
    return SINPE_OK;
}

static inline float ld(const char *p, sinpe_type t)
{
    return sinpe_load_position(p, t); /* exact for the four float types */
}

static inline float rnd(float v, sinpe_type t)
{
    if (t == SINPE_F16)
        return sinpe_f16_to_f32(sinpe_f32_to_f16(v));
    if (t == SINPE_BF16)
        return sinpe_bf16_to_f32(sinpe_f32_to_bf16(v));
    return v;
}

static inline void st(char *p, float v, sinpe_type t)
{
    if (t == SINPE_F32) {
        memcpy(p, &v, 4);
    } else {
        uint16_t h = t == SINPE_F16 ? sinpe_f32_to_f16(v) : sinpe_f32_to_bf16(v);
        memcpy(p, &h, 2);
    }
}

/* One vector of a float32, float16 or bfloat16 x: element k at v + k * cs. */
static void rotate_f(const sinpe_rope *r, char *v, int64_t cs, const float *c, const float *s)
{
    sinpe_type t = r->type;
    int64_t h = r->rot / 2;
    for (int64_t i = 0; i < h; i++) {
        /* the pair of elements one rotation mixes, and their table columns */
        int64_t j0 = r->pairs ? 2 * i : i, j1 = r->pairs ? 2 * i + 1 : i + h;
        float a = ld(v + j0 * cs, t), b = ld(v + j1 * cs, t), y0, y1;
        if (r->pairs) { /* float32 throughout, one rounding at the end */
            y0 = a * c[j0] + (-b) * s[j0];
            y1 = b * c[j1] + a * s[j1];
        } else { /* each op in x's type */
            float c0 = rnd(c[j0], t), c1 = rnd(c[j1], t), s0 = rnd(s[j0], t), s1 = rnd(s[j1], t);
            y0 = rnd(rnd(a * c0, t) + rnd((-b) * s0, t), t);
            y1 = rnd(rnd(b * c1, t) + rnd(a * s1, t), t);
        }
        st(v + j0 * cs, y0, t);
        st(v + j1 * cs, y1, t);
    }
}

static void rotate_d(const sinpe_rope *r, char *v, int64_t cs, const float *c, const float *s)
{
    int64_t h = r->rot / 2;
    for (int64_t i = 0; i < h; i++) {
        int64_t j0 = r->pairs ? 2 * i : i, j1 = r->pairs ? 2 * i + 1 : i + h;
        double a, b;
        memcpy(&a, v + j0 * cs, 8);
        memcpy(&b, v + j1 * cs, 8);
        double y0 = a * (double)c[j0] + (-b) * (double)s[j0];
        double y1 = b * (double)c[j1] + a * (double)s[j1];
        memcpy(v + j0 * cs, &y0, 8);
        memcpy(v + j1 * cs, &y1, 8);
    }
}

typedef struct {
    const sinpe_rope *r;
    int n;
    int64_t shape[SINPE_MAX_DIMS], xs[SINPE_MAX_DIMS], ts[SINPE_MAX_DIMS];
} rope_ctx;

static void rope_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    (void)tid;
    const rope_ctx *k = ctx;
    const sinpe_rope *r = k->r;
    int64_t cs = r->strides[r->ndim - 1];
    sinpe_walker w;
    sinpe_walker_init(&w, k->n, k->shape, k->xs, k->ts, begin);
    for (int64_t i = begin; i < end; i++, sinpe_walker_next(&w)) {
        char *v = (char *)r->data + w.o1;
        const float *c = r->cos + w.o2, *s = r->sin + w.o2;
        if (r->type == SINPE_F64)
            rotate_d(r, v, cs, c, s);
        else
            rotate_f(r, v, cs, c, s);
    }
}

int sinpe_rope_run(const sinpe_rope *r, int threads)
{
    int st0 = sinpe_rope_check(r);
    if (st0 != SINPE_OK)
        return st0;
    if (threads < 1 || threads > SINPE_MAX_THREADS)
        return SINPE_E_THREADS;
    rope_ctx k;
    memset(&k, 0, sizeof k);
    k.r = r;
    k.n = r->ndim - 1;
    int64_t vectors = 1, S = r->shape[r->seq_axis];
    for (int a = 0; a < k.n; a++) {
        k.shape[a] = r->shape[a];
        k.xs[a] = r->strides[a];
        k.ts[a] = a == r->seq_axis ? r->rot : (a == r->batch_axis && r->tables > 1) ? S * r->rot : 0;
        vectors = r->shape[a] == 0 ? 0 : vectors * r->shape[a];
    }
    if (vectors == 0 || r->rot == 0)
        return SINPE_OK;
    sinpe_parallel_for(vectors, ROPE_MIN_VECTORS, threads, rope_task, &k);
    return SINPE_OK;
}
