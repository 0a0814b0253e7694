/* Rotary position embedding applied in place (sinpe.h: ROPE jobs).
 *
 * One pass over x: each vector along the last axis is read, rotated with its position's
 * row of the cos/sin tables and written back, in torch's order of operations and
 * roundings for the two conventions (transformers' halves, rotary-embedding-torch's
 * pairs).  The core is built with -ffp-contract=off: every product and sum below is its
 * own rounded operation, as torch's separate eager kernels are.
 */
#include "engine/engine.h"

#include <string.h>

#include "engine/layout.h"

/* A rope table: float32, C order, of shape (tables, seq, rot); for an x with no elements
 * (nothing is rotated) also of no rows, (tables, 0, rot). */
static int table_ok(const sinpe_array *t, int64_t seq, int64_t n)
{
    if (t->type != SINPE_F32 || t->ndim != 3 || t->shape[0] < 1
        || (t->shape[1] != seq && !(n == 0 && t->shape[1] == 0)))
        return 0;
    if (t->shape[1] == 0 || t->shape[2] == 0) /* empty: nothing is read */
        return 1;
    return (t->shape[2] <= 1 || t->strides[2] == 4) && (t->shape[1] <= 1 || t->strides[1] == 4 * t->shape[2])
           && (t->shape[0] <= 1 || t->strides[0] == 4 * t->shape[2] * t->shape[1]);
}

int sinpe_rope_check(const sinpe_job *j)
{
    const sinpe_array *x = &j->dst;
    int nd = x->ndim, sa = j->rope.seq_axis, ba = j->rope.batch_axis;
    if (nd < 2)
        return SINPE_E_DIMS;
    if (sa < 0 || sa >= nd - 1 || ba < -1 || ba >= nd - 1 || ba == sa)
        return SINPE_E_AXIS;
    int64_t n = 1;
    for (int k = 0; k < nd; k++)
        n = x->shape[k] == 0 ? 0 : n * x->shape[k];
    const sinpe_array *c = &j->rope.cos, *s = &j->rope.sin;
    if (!table_ok(c, x->shape[sa], n) || !table_ok(s, x->shape[sa], n)
        || memcmp(c->shape, s->shape, sizeof c->shape[0] * 3))
        return SINPE_E_TABLES;
    int64_t rot = c->shape[2], tables = c->shape[0];
    if (rot < 2 || rot % 2 || rot > x->shape[nd - 1])
        return SINPE_E_ROT;
    if (tables > 1 && (ba < 0 || x->shape[ba] != tables))
        return SINPE_E_TABLES;
    if (n > 0 && (!c->data || !s->data))
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
static void rotate_f(sinpe_type t, int pairs, int64_t rot, char *v, int64_t cs, const float *c,
                     const float *s)
{
    int64_t h = rot / 2;
    for (int64_t i = 0; i < h; i++) {
        /* the pair of elements one rotation mixes, and their table columns */
        int64_t j0 = pairs ? 2 * i : i, j1 = pairs ? 2 * i + 1 : i + h;
        float a = ld(v + j0 * cs, t), b = ld(v + j1 * cs, t), y0, y1;
        if (pairs) { /* float32 throughout, one rounding at the end */
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

static void rotate_d(int pairs, int64_t rot, char *v, int64_t cs, const float *c, const float *s)
{
    int64_t h = rot / 2;
    for (int64_t i = 0; i < h; i++) {
        int64_t j0 = pairs ? 2 * i : i, j1 = pairs ? 2 * i + 1 : i + h;
        double a, b;
        memcpy(&a, v + j0 * cs, 8);
        memcpy(&b, v + j1 * cs, 8);
        double y0 = a * (double)c[j0] + (-b) * (double)s[j0];
        double y1 = b * (double)c[j1] + a * (double)s[j1];
        memcpy(v + j0 * cs, &y0, 8);
        memcpy(v + j1 * cs, &y1, 8);
    }
}

/* The vectors' axes (all but the last) with x's strides and the tables' row strides (in
 * floats): seq_axis steps a table row, batch_axis a table (when there are several). */
void sinpe_rope_setup(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    int64_t rot = j->rope.cos.shape[2], S = j->dst.shape[j->rope.seq_axis];
    int tables = j->rope.cos.shape[0] > 1;
    p->row_n = j->dst.ndim - 1;
    p->count = 1;
    for (int a = 0; a < p->row_n; a++) {
        p->row_shape[a] = j->dst.shape[a];
        p->row_dst[a] = j->dst.strides[a];
        p->row_pos[a] = a == j->rope.seq_axis ? rot : (a == j->rope.batch_axis && tables) ? S * rot : 0;
        p->count = j->dst.shape[a] == 0 ? 0 : p->count * j->dst.shape[a];
    }
    /* A rotated value costs about 1/32 of a computed one (a few multiplies and adds at memory
     * speed; the steps between signal checks stay counted per value): a second thread pays
     * from about 4 million values on.  Below that its start-up and, right after torch's
     * parallel work, a core shared with torch's spinning OpenMP worker cost more than it saves
     * (Zen 5, 1 x 32 x 512 x 128 float32: 0.27 ms on one thread, 0.20 on two when quiet,
     * 1.5 ms on two interleaved with HF's eager rotation). */
    int64_t values = p->count * j->rope.cos.shape[2];
    p->nslots = values < 2 * SINPE_ROPE_SHARE * SINPE_MIN_THREAD_WORK ? 1 : p->o.threads;
}

static int64_t rope_items(const sinpe_plan *p)
{
    return sinpe_ceil_div(p->count, SINPE_ROPE_BLOCK);
}

static int64_t rope_work(const sinpe_plan *p)
{
    return SINPE_ROPE_BLOCK * p->j.rope.cos.shape[2];
}

static void rope_run(sinpe_plan *p, int64_t item, int tid)
{
    (void)tid;
    const sinpe_job *j = &p->j;
    int64_t begin = item * SINPE_ROPE_BLOCK;
    int64_t end = p->count - begin < SINPE_ROPE_BLOCK ? p->count : begin + SINPE_ROPE_BLOCK;
    int64_t cs = j->dst.strides[j->dst.ndim - 1], rot = j->rope.cos.shape[2];
    const float *cos = j->rope.cos.data, *sin = j->rope.sin.data;
    sinpe_walker w;
    sinpe_walker_init(&w, p->row_n, p->row_shape, p->row_dst, p->row_pos, begin);
    sinpe_type t = j->dst.type;
    int kind = t == SINPE_F16 ? SINPE_HALF_F16 : t == SINPE_BF16 ? SINPE_HALF_BF16 : SINPE_HALF_F32;
    int vec = !j->rope.pairs && t != SINPE_F64 && cs == sinpe_type_size(t); /* the path's */
    for (int64_t i = begin; i < end; i++, sinpe_walker_next(&w)) {
        char *v = (char *)j->dst.data + w.o1;
        if (vec)
            p->path->rope_half(v, cos + w.o2, sin + w.o2, (size_t)(rot / 2), kind);
        else if (j->dst.type == SINPE_F64)
            rotate_d(j->rope.pairs, rot, v, cs, cos + w.o2, sin + w.o2);
        else
            rotate_f(j->dst.type, j->rope.pairs, rot, v, cs, cos + w.o2, sin + w.o2);
    }
}

const sinpe_stage sinpe_rope_stages[1] = {
    { .items = rope_items, .work = rope_work, .run = rope_run },
};
