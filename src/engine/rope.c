/* Rotary position embedding applied in place (sinpe.h: ROPE jobs).
 *
 * One pass over x: each vector along the last axis is read, rotated with its position's
 * row of the cos/sin tables and written back, in torch's order of operations and
 * roundings for the two conventions (transformers' halves, rotary-embedding-torch's
 * pairs).  The core is built with -ffp-contract=off: every product and sum below is its
 * own rounded operation, as torch's separate eager kernels are.
 */
#include "engine/engine.h"

#include <math.h>
#include <string.h>

#include "engine/layout.h"
#include "platform/threads.h"

/* A rope table: float32, float16 or bfloat16 of shape (tables, seq, rot), any strides (0
 * too: a broadcast view); for an x with no elements (nothing is rotated) also of no rows,
 * (tables, 0, rot). */
static int table_ok(const sinpe_array *t, int64_t seq, int64_t n)
{
    if ((t->type != SINPE_F32 && t->type != SINPE_F16 && t->type != SINPE_BF16) || t->ndim != 3
        || t->shape[0] < 1 || t->shape[2] < 0
        || (t->shape[1] != seq && !(n == 0 && t->shape[1] == 0)))
        return 0;
    int64_t lo, hi;
    return sinpe_extent(3, t->shape, t->strides, sinpe_type_size(t->type), &lo, &hi) == SINPE_OK;
}

static int64_t elements(const sinpe_array *x)
{
    return sinpe_elements(x->ndim, x->shape);
}

/* The vectors of x: every axis but the last. */
static int64_t vectors(const sinpe_array *x)
{
    return x->ndim > 0 && x->shape[x->ndim - 1] == 0 ? 0 : sinpe_elements(x->ndim - 1, x->shape);
}

/* a and b reach no byte in common (by their extents; an empty one reaches none). */
static int apart(const sinpe_array *a, const sinpe_array *b)
{
    int64_t al, ah, bl, bh;
    if (elements(a) == 0 || elements(b) == 0 || !a->data || !b->data)
        return 1;
    if (sinpe_extent(a->ndim, a->shape, a->strides, sinpe_type_size(a->type), &al, &ah) != SINPE_OK
        || sinpe_extent(b->ndim, b->shape, b->strides, sinpe_type_size(b->type), &bl, &bh)
               != SINPE_OK)
        return 0;
    const char *pa = a->data, *pb = b->data;
    return pa + ah <= pb + bl || pb + bh <= pa + al;
}

/* src is dst itself: the same memory in the same layout (the rotation is in place). */
static int same_array(const sinpe_array *a, const sinpe_array *b)
{
    if (a->data != b->data || a->type != b->type || a->ndim != b->ndim)
        return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] != b->shape[k] || (a->shape[k] > 1 && a->strides[k] != b->strides[k]))
            return 0;
    return 1;
}

/* One rotated array x (its source src: none when its ndim is 0 and its data NULL; a source
 * of elements with no memory, a freed tensor's, is refused, never read as "none") against
 * the job's axes and tables. */
static int part_check(const sinpe_job *j, const sinpe_array *x, const sinpe_array *src)
{
    int nd = x->ndim, sa = j->rope.seq_axis, ba = j->rope.batch_axis;
    if (nd < 2)
        return SINPE_E_DIMS;
    if (sa < 0 || sa >= nd - 1 || ba < -1 || ba >= nd - 1 || ba == sa)
        return SINPE_E_AXIS;
    int64_t n = elements(x);
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
    if (!apart(x, c) || !apart(x, s))
        return SINPE_E_OVERLAP;
    if (src->data || src->ndim > 0) {
        if (src->type != x->type || src->ndim != nd
            || memcmp(src->shape, x->shape, sizeof x->shape[0] * (size_t)nd))
            return SINPE_E_SHAPE;
        if (!src->data)
            return n > 0 ? SINPE_E_NULL : SINPE_OK;
        int64_t lo, hi;
        int st = sinpe_extent(nd, src->shape, src->strides, sinpe_type_size(src->type), &lo, &hi);
        if (st != SINPE_OK)
            return st;
        if (!same_array(x, src) && !apart(x, src))
            return SINPE_E_OVERLAP;
    }
    return SINPE_OK;
}

/* The form's flags are known; float64 rotates by torch's ops or in one rounding (the same). */
static int form_ok(const sinpe_job *j)
{
    int f = j->rope.form;
    if (f & ~SINPE_ROPE_FORMS)
        return 0;
    int f64 = j->dst.type == SINPE_F64 || (j->rope.second && j->rope.dst2.type == SINPE_F64);
    if (f64 && (f & ~SINPE_ROPE_ONE))
        return 0;
    /* bfloat16 inference is a float32 or float16 x's; a bfloat16 store a bfloat16 result's */
    int bf = j->dst.type == SINPE_BF16 || (j->rope.second && j->rope.dst2.type == SINPE_BF16);
    return (!(f & SINPE_ROPE_BF16) || !bf)
           && (!(f & SINPE_ROPE_OV_STORE) || (f & SINPE_ROPE_BF16) || bf);
}

int sinpe_rope_check(const sinpe_job *j)
{
    if (!form_ok(j))
        return SINPE_E_FORM;
    int st = part_check(j, &j->dst, &j->rope.src);
    if (st != SINPE_OK || !j->rope.second)
        return st;
    const sinpe_array *x = &j->rope.dst2;
    if (x->readonly)
        return SINPE_E_READONLY;
    if ((int)x->type < 0 || x->type > SINPE_BF16)
        return SINPE_E_TYPE;
    if (x->ndim < 0 || x->ndim > SINPE_MAX_DIMS)
        return SINPE_E_DIMS;
    for (int k = 0; k < x->ndim; k++)
        if (x->shape[k] < 0)
            return SINPE_E_SHAPE;
    st = part_check(j, x, &j->rope.src2);
    if (st == SINPE_OK)
        st = sinpe_overlap_check(x->ndim, x->shape, x->strides, sinpe_type_size(x->type));
    if (st == SINPE_OK && elements(x) > 0 && !x->data)
        st = SINPE_E_NULL;
    if (st == SINPE_OK && (!apart(&j->dst, x) || !apart(&j->dst, &j->rope.src2)
                           || !apart(x, &j->rope.src)))
        st = SINPE_E_OVERLAP;
    return st;
}

/* An element of a float32, float16 or bfloat16 x or table, widened exactly: its own three
 * cases, where engine/store.h's sinpe_load_position (every position type) measured 1.6x
 * slower in the engines' forms even forced inline (Zen 4, producer='inductor' 1 x 512 x 32 x
 * 128 float32 pairs: 1.7-1.8 ms against 3.4 ms). */
static inline float ld(const char *p, sinpe_type t)
{
    if (t == SINPE_F32) {
        float v;
        memcpy(&v, p, 4);
        return v;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return t == SINPE_F16 ? sinpe_f16_to_f32(h) : sinpe_bf16_to_f32(h);
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

/* A table row: element k at p + k * step, of type t (widened exactly). */
typedef struct {
    const char *p;
    int64_t step;
    sinpe_type t;
} trow;

static inline float tl(const trow *r, int64_t k)
{
    return ld(r->p + k * r->step, r->t);
}

/* n values of a row from column k0 on, widened to float32 */
static void widen(const trow *r, int64_t k0, int64_t n, float *out)
{
    for (int64_t k = 0; k < n; k++)
        out[k] = tl(r, k0 + k);
}

/* The NaN OpenVINO's bfloat16 conversions make of any NaN (positive, quiet), as float32. */
#define OV_NAN 0x7fc00000u

/* OpenVINO's float32 -> bfloat16 conversion (ov::bfloat16(float): a tie rounds away from an
 * odd last bit and toward an even one, by the bits), as a float32 value. */
static inline float ov_bf16(float v)
{
    uint32_t x = sinpe_f32_bits(v);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return sinpe_bits_f32(OV_NAN);
    return sinpe_bits_f32(((x + ((x & 0x10000u) >> 1)) >> 16) << 16);
}

/* OpenVINO's bfloat16 to nearest even (vcvtneps2bf16 in its kernels and reorders): a NaN
 * becomes its one quiet NaN, a subnormal a zero of its sign (the instruction's DAZ). */
static inline float ov_rne(float v)
{
    uint32_t x = sinpe_f32_bits(v);
    if ((x & 0x7f800000u) == 0)
        return sinpe_bits_f32(x & 0x80000000u);
    return isnan(v) ? sinpe_bits_f32(OV_NAN) : rnd(v, SINPE_BF16);
}

/* A result rounded to bfloat16 (BF16 inference) or to x's type t, by OpenVINO's conversion
 * when ov says so. */
static inline float rnd_store(float v, sinpe_type t, int ov)
{
    if (t != SINPE_BF16)
        return rnd(v, t);
    return ov ? ov_bf16(v) : ov_rne(v);
}

/* A bfloat16 x rotated by OpenVINO: its results are rounded (and their NaN made) by its
 * conversions, and stored as they are. */
static inline int ov_bf16_x(int form, sinpe_type t)
{
    return t == SINPE_BF16 && (form & SINPE_ROPE_OV_TABLES);
}

/* A result v of x's type t stored at p: as st, or v's bits as they are when the form has
 * rounded it already (ov_bf16_x). */
static inline void st_form(char *p, float v, sinpe_type t, int form)
{
    if (ov_bf16_x(form, t)) {
        uint16_t h = (uint16_t)(sinpe_f32_bits(v) >> 16);
        memcpy(p, &h, 2);
    } else {
        st(p, v, t);
    }
}

/* BF16 inference's input: a float32 x's value by a Reorder (to nearest even), a float16 x's
 * by a Convert (OpenVINO's rounding). */
static inline float bf16_in(float v, sinpe_type t)
{
    return t == SINPE_F16 ? ov_bf16(v) : ov_rne(v);
}

/* One pair (a, b) of an x of type t in float32, rounded to t once by the store: by an
 * engine's form (sinpe.h: sinpe_rope_form), or (form 0, pairs) rotary-embedding-torch's
 * pairs.  c0, s0 the tables' values at a's column, c1, s1 at b's.  The tables are in x's type
 * as an engine's rot / 2 cache is, or as transformers' halves cast them; the pairs of
 * rotary-embedding-torch stay float32.  BF16 (a float32 x): x and the results in bfloat16. */
static inline __attribute__((always_inline)) void rotate_form(int form, int pairs, sinpe_type t,
                                                              float a, float b, float c0,
                                                              float s0, float c1, float s1,
                                                              float *y0, float *y1)
{
    if (form & SINPE_ROPE_HALF_CACHE) {
        c1 = c0;
        s1 = s0;
    }
    if (form & SINPE_ROPE_OV_TABLES) {
        if (t == SINPE_BF16) { /* float32 tables' Convert node; bfloat16 tables are exact */
            c0 = ov_bf16(c0);
            s0 = ov_bf16(s0);
            c1 = ov_bf16(c1);
            s1 = ov_bf16(s1);
        }
    } else if (!pairs || (form & SINPE_ROPE_HALF_CACHE)) {
        c0 = rnd(c0, t);
        s0 = rnd(s0, t);
        c1 = rnd(c1, t);
        s1 = rnd(s1, t);
    }
    if (form & SINPE_ROPE_BF16) {
        a = bf16_in(a, t);
        b = bf16_in(b, t);
    }
    float bs = b * s0;
    if (form & SINPE_ROPE_FMA) { /* a fused multiply-subtract: a NaN addend keeps its sign */
        *y0 = fmaf(a, c0, isnan(bs) ? bs : -bs);
        *y1 = fmaf(a, s1, b * c1);
    } else if (form & SINPE_ROPE_HALF_CACHE) { /* an engine's x0 c - x1 s */
        *y0 = a * c0 - bs;
        *y1 = b * c1 + a * s1;
    } else { /* transformers' graph (rotate_half negates x1 first), or the pairs' */
        *y0 = a * c0 + (-b) * s0;
        *y1 = b * c1 + a * s1;
    }
    if ((form & (SINPE_ROPE_BF16 | SINPE_ROPE_OV_STORE)) || ov_bf16_x(form, t)) {
        /* the store's rounding, here (st_form then keeps the bits) */
        sinpe_type r = form & SINPE_ROPE_BF16 ? SINPE_BF16 : t;
        *y0 = rnd_store(*y0, r, form & SINPE_ROPE_OV_STORE);
        *y1 = rnd_store(*y1, r, form & SINPE_ROPE_OV_STORE);
    }
}

/* One vector of a float32, float16 or bfloat16 x: element k at v + k * cs (the body: inlined
 * where x's type and the tables' are constants, rotate_f). */
static inline __attribute__((always_inline)) void rotate_body(sinpe_type t, int pairs, int form,
                                                              int64_t rot, int64_t d, char *v,
                                                              int64_t cs, const trow *c,
                                                              const trow *s)
{
    if (form & SINPE_ROPE_BF16) /* the columns past rot pass through bfloat16 too */
        for (int64_t k = rot; k < d; k++)
            st(v + k * cs, bf16_in(ld(v + k * cs, t), t), t);
    int64_t h = rot / 2;
    for (int64_t i = 0; i < h; i++) {
        /* the pair of elements one rotation mixes, and their table columns */
        int64_t j0 = pairs ? 2 * i : i, j1 = pairs ? 2 * i + 1 : i + h;
        float a = ld(v + j0 * cs, t), b = ld(v + j1 * cs, t), y0, y1;
        float cj0 = tl(c, j0), cj1 = tl(c, j1), sj0 = tl(s, j0), sj1 = tl(s, j1);
        if (form & ~SINPE_ROPE_EACH) { /* float32, one rounding */
            int f = pairs && (((form & SINPE_ROPE_TAIL16) && i > 8 * (rot / 16))
                              || ((form & SINPE_ROPE_TAIL8) && i >= 4 * (rot / 8)))
                        ? form & ~SINPE_ROPE_FMA : form;
            rotate_form(f, pairs, t, a, b, cj0, sj0, cj1, sj1, &y0, &y1);
        } else { /* each op in x's type */
            float c0 = rnd(cj0, t), c1 = rnd(cj1, t), s0 = rnd(sj0, t), s1 = rnd(sj1, t);
            y0 = rnd(rnd(a * c0, t) + rnd((-b) * s0, t), t);
            y1 = rnd(rnd(b * c1, t) + rnd(a * s1, t), t);
        }
        st_form(v + j0 * cs, y0, t, form);
        st_form(v + j1 * cs, y1, t, form);
    }
}

/* rotate_body with x's type and the tables' type as constants for the usual pairs (float32
 * tables; a half x's own tables), so that no element's load or store asks its type: the
 * same operations in the same order (an engine's form; Zen 4, 1 x 512 x 32 x 128 float32
 * pairs, producer='inductor': 20.8 -> 4.1 ms; the forms with FMA call fmaf per element). */
static void rotate_f(sinpe_type t, int pairs, int form, int64_t rot, int64_t d, char *v,
                     int64_t cs, const trow *c, const trow *s)
{
    /* copies whose table type is a constant the inlined body sees */
    trow c1 = *c, s1 = *s;
    if (c->t != s->t || (c->t != SINPE_F32 && c->t != t)) {
        rotate_body(t, pairs, form, rot, d, v, cs, c, s);
    } else if (c->t == SINPE_F32) {
        c1.t = s1.t = SINPE_F32;
        if (t == SINPE_F32)
            rotate_body(SINPE_F32, pairs, form, rot, d, v, cs, &c1, &s1);
        else if (t == SINPE_F16)
            rotate_body(SINPE_F16, pairs, form, rot, d, v, cs, &c1, &s1);
        else
            rotate_body(SINPE_BF16, pairs, form, rot, d, v, cs, &c1, &s1);
    } else if (t == SINPE_F16) { /* x's own half-type tables */
        c1.t = s1.t = SINPE_F16;
        rotate_body(SINPE_F16, pairs, form, rot, d, v, cs, &c1, &s1);
    } else {
        c1.t = s1.t = SINPE_BF16;
        rotate_body(SINPE_BF16, pairs, form, rot, d, v, cs, &c1, &s1);
    }
}

static void rotate_d(int pairs, int64_t rot, char *v, int64_t cs, const trow *c, const trow *s)
{
    int64_t h = rot / 2;
    for (int64_t i = 0; i < h; i++) {
        int64_t j0 = pairs ? 2 * i : i, j1 = pairs ? 2 * i + 1 : i + h;
        double a, b;
        memcpy(&a, v + j0 * cs, 8);
        memcpy(&b, v + j1 * cs, 8);
        double y0 = a * (double)tl(c, j0) + (-b) * (double)tl(s, j0);
        double y1 = b * (double)tl(c, j1) + a * (double)tl(s, j1);
        memcpy(v + j0 * cs, &y0, 8);
        memcpy(v + j1 * cs, &y1, 8);
    }
}

/* The kind the path reads contiguous cos/sin rows as (paths/path.h, rope_half): float32
 * rows, or rows of x's own half type (read as x is, no rounding); -1: widen them first. */
static int table_kind(const trow *c, const trow *s, int kind)
{
    int64_t size = sinpe_type_size(c->t);
    if (c->t != s->t || c->step != size || s->step != c->step
        || (uintptr_t)c->p % (uintptr_t)size || (uintptr_t)s->p % (uintptr_t)size)
        return -1; /* (the path reads its rows as typed pointers: aligned ones only) */
    if (c->t == SINPE_F32)
        return SINPE_HALF_F32;
    int own = kind == SINPE_HALF_F16 ? SINPE_F16 : kind == SINPE_HALF_BF16 ? SINPE_BF16 : -1;
    return (int)c->t == own ? kind : -1;
}

/* Pairs of a row widened at once for the path's rotation (4 KiB of the thread's stack). */
#define ROPE_WIDE 256

/* A contiguous vector of x's type (kind), transformers' halves, by the code path: the tables'
 * rows as they are when they are contiguous float32, else widened (in chunks past
 * ROPE_WIDE pairs, by the scalar path's spans, bit for bit the same rotation). */
static void rotate_vec(const sinpe_path_ops *path, char *v, int64_t rot, int kind, const trow *c,
                       const trow *s, float (*buf)[2 * ROPE_WIDE], int *fresh)
{
    int64_t h = rot / 2;
    int tkind = table_kind(c, s, kind);
    if (tkind >= 0) {
        path->rope_half(v, c->p, s->p, (size_t)h, kind, tkind);
        return;
    }
    if (h <= ROPE_WIDE) {
        if (*fresh) { /* the row differs from the last vector's */
            widen(c, 0, rot, buf[0]);
            widen(s, 0, rot, buf[1]);
            *fresh = 0;
        }
        path->rope_half(v, buf[0], buf[1], (size_t)h, kind, SINPE_HALF_F32);
        return;
    }
    size_t w = kind == SINPE_HALF_F32 ? 4 : 2;
    float c0[ROPE_WIDE / 2], c1[ROPE_WIDE / 2], s0[ROPE_WIDE / 2], s1[ROPE_WIDE / 2];
    for (int64_t i = 0; i < h; i += ROPE_WIDE / 2) {
        int64_t n = h - i < ROPE_WIDE / 2 ? h - i : ROPE_WIDE / 2;
        widen(c, i, n, c0);
        widen(c, h + i, n, c1);
        widen(s, i, n, s0);
        widen(s, h + i, n, s1);
        sinpe_rope_span_scalar(v + (size_t)i * w, v + (size_t)(h + i) * w, c0, c1, s0, s1,
                               (size_t)n, kind);
    }
    *fresh = 1;
}

/* One vector of x's type (kind), rotary-embedding-torch's pairs, by the code path: the rows
 * as they are when they are contiguous float32 (or x's own half type) and x is contiguous,
 * else widened (in chunks past 2 * ROPE_WIDE columns) and, for a strided x, rotated by the
 * scalar span: the same rule, bit for bit. */
static void rotate_pairs(const sinpe_path_ops *path, char *v, int64_t cs, int64_t w, int64_t rot,
                         int kind, const trow *c, const trow *s, float (*buf)[2 * ROPE_WIDE],
                         int *fresh)
{
    int tkind = table_kind(c, s, kind);
    if (tkind >= 0 && cs == w) {
        path->rope_pairs(v, c->p, s->p, (size_t)(rot / 2), kind, tkind);
        return;
    }
    if (rot <= 2 * ROPE_WIDE) {
        if (*fresh) { /* the row differs from the last vector's */
            widen(c, 0, rot, buf[0]);
            widen(s, 0, rot, buf[1]);
            *fresh = 0;
        }
        if (cs == w)
            path->rope_pairs(v, buf[0], buf[1], (size_t)(rot / 2), kind, SINPE_HALF_F32);
        else
            sinpe_rope_pairs_span(v, (ptrdiff_t)cs, buf[0], buf[1], (size_t)(rot / 2), kind);
        return;
    }
    float cw[ROPE_WIDE], sw[ROPE_WIDE];
    for (int64_t i = 0; i < rot; i += ROPE_WIDE) {
        int64_t n = rot - i < ROPE_WIDE ? rot - i : ROPE_WIDE;
        widen(c, i, n, cw);
        widen(s, i, n, sw);
        sinpe_rope_pairs_span(v + i * cs, (ptrdiff_t)cs, cw, sw, (size_t)(n / 2), kind);
    }
    *fresh = 1;
}

/* The vectors' count and the threads: the work of both arrays. */
void sinpe_rope_setup(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    p->count = vectors(&j->dst) + (j->rope.second ? vectors(&j->rope.dst2) : 0);
    /* A rotated value costs about 1/8 of a computed one (a few multiplies and adds at memory
     * speed, a run of rows per call; the steps between signal checks stay counted per value):
     * a second thread pays from about 1 million values on (engine.h).  Below that its
     * start-up and, right after torch's
     * parallel work, a core shared with torch's spinning OpenMP worker cost more than it saves
     * (Zen 5, 1 x 32 x 512 x 128 float32: 0.27 ms on one thread, 0.20 on two when quiet,
     * 1.5 ms on two interleaved with HF's eager rotation).  On an adopted OpenMP runtime
     * (torch's workers, platform/threads.h) the second thread is one of torch's own, which
     * spins waiting for work: it pays from a thread's minimum work on (Zen 4, 2 threads,
     * beside transformers' eager rotation: 1 x 32 x 24 x 128 bfloat16 q with 8-head k,
     * 123 k values, 77 -> 57 us; 8 x 8 x 128 x 64 float16 252 -> 135 us). */
    int64_t values = p->count * j->rope.cos.shape[2];
    int64_t from = sinpe_threads_openmp() ? SINPE_ROPE_OPENMP_VALUES
                                          : 2 * SINPE_ROPE_SHARE * SINPE_MIN_THREAD_WORK;
    p->nslots = values < from ? 1 : p->o.threads;
}

/* Items of the first array, then of the second. */
static int64_t items_of(const sinpe_array *x)
{
    return sinpe_ceil_div(vectors(x), SINPE_ROPE_BLOCK);
}

static int64_t rope_items(const sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    return items_of(&j->dst) + (j->rope.second ? items_of(&j->rope.dst2) : 0);
}

static int64_t rope_work(const sinpe_plan *p)
{
    return SINPE_ROPE_BLOCK * p->j.rope.cos.shape[2];
}

/* Every row of a table starts aligned to its type (its data and its row and table steps):
 * a run's rows may be read as typed pointers (table_kind checks one row's). */
static int rows_aligned(const sinpe_array *t)
{
    int64_t size = sinpe_type_size(t->type);
    return (uintptr_t)t->data % (uintptr_t)size == 0 && t->strides[0] % size == 0
           && t->strides[1] % size == 0;
}

/* Vectors begin .. end - 1 of x (read from src when it is another array). */
static void rope_part(const sinpe_plan *p, const sinpe_array *x, const sinpe_array *src,
                      int64_t begin, int64_t end)
{
    const sinpe_job *j = &p->j;
    int rn = x->ndim - 1, sa = j->rope.seq_axis, ba = j->rope.batch_axis;
    int64_t d = x->shape[rn], cs = x->strides[rn], rot = j->rope.cos.shape[2];
    sinpe_type t = x->type;
    int64_t w = sinpe_type_size(t);
    int copy = src->data && !same_array(x, src);
    int64_t scs = copy ? src->strides[rn] : cs;
    const sinpe_array *C = &j->rope.cos, *S = &j->rope.sin;
    int tables = C->shape[0] > 1;
    trow c = { NULL, C->strides[2], C->type }, s = { NULL, S->strides[2], S->type };
    sinpe_walker wk;
    sinpe_walker_init(&wk, rn, x->shape, x->strides, copy ? src->strides : x->strides, begin);
    int kind = t == SINPE_F16 ? SINPE_HALF_F16 : t == SINPE_BF16 ? SINPE_HALF_BF16 : SINPE_HALF_F32;
    int vec = !j->rope.pairs && (!j->rope.form || j->rope.form == SINPE_ROPE_EACH) && t != SINPE_F64
              && cs == w; /* the path's */
    int pv = j->rope.pairs && !j->rope.form && t != SINPE_F64; /* the path's pairs */
    float buf[2][2 * ROPE_WIDE];
    const char *last_c = NULL, *last_s = NULL;
    int fresh = 1;
    /* runs along the walker's last axis in one rope_rows call, where the path reads the
     * tables' rows as they are (c.p and s.p are not read here: only their type and step) */
    int inner = rn - 1;
    sinpe_rope_rows rr = {
        .vstep = (ptrdiff_t)x->strides[inner],
        .cstep = (ptrdiff_t)(inner == sa ? C->strides[1] : tables && inner == ba ? C->strides[0] : 0),
        .sstep = (ptrdiff_t)(inner == sa ? S->strides[1] : tables && inner == ba ? S->strides[0] : 0),
        .n = (size_t)(rot / 2), .kind = kind, .pairs = pv,
        .tkind = (vec || (pv && cs == w)) && !copy && rows_aligned(C) && rows_aligned(S)
                     ? table_kind(&c, &s, kind) : -1,
    };
    for (int64_t i = begin; i < end;) {
        char *v = (char *)x->data + wk.o1;
        if (copy) {
            const char *u = (const char *)src->data + wk.o2;
            if (cs == w && scs == w)
                memcpy(v, u, (size_t)(d * w));
            else
                for (int64_t k = 0; k < d; k++)
                    memcpy(v + k * cs, u + k * scs, (size_t)w);
        }
        int64_t b = tables ? wk.idx[ba] : 0, q = wk.idx[sa];
        c.p = (const char *)C->data + b * C->strides[0] + q * C->strides[1];
        s.p = (const char *)S->data + b * S->strides[0] + q * S->strides[1];
        int64_t run = 1;
        if (rr.tkind >= 0) {
            run = x->shape[inner] - wk.idx[inner] < end - i ? x->shape[inner] - wk.idx[inner]
                                                            : end - i;
            rr.v = v;
            rr.c = c.p;
            rr.s = s.p;
            rr.rows = (size_t)run;
            p->path->rope_rows(&rr);
        } else {
            if (c.p != last_c || s.p != last_s) {
                fresh = 1;
                last_c = c.p;
                last_s = s.p;
            }
            if (vec)
                rotate_vec(p->path, v, rot, kind, &c, &s, buf, &fresh);
            else if (pv)
                rotate_pairs(p->path, v, cs, w, rot, kind, &c, &s, buf, &fresh);
            else if (t == SINPE_F64)
                rotate_d(j->rope.pairs, rot, v, cs, &c, &s);
            else
                rotate_f(t, j->rope.pairs, j->rope.form, rot, d, v, cs, &c, &s);
        }
        i += run;
        for (int64_t k = 0; k < run; k++)
            sinpe_walker_next(&wk);
    }
}

static void rope_run(sinpe_plan *p, int64_t item, int tid)
{
    (void)tid;
    const sinpe_job *j = &p->j;
    int64_t first = items_of(&j->dst);
    int second = item >= first;
    const sinpe_array *x = second ? &j->rope.dst2 : &j->dst;
    const sinpe_array *src = second ? &j->rope.src2 : &j->rope.src;
    int64_t begin = (second ? item - first : item) * SINPE_ROPE_BLOCK, n = vectors(x);
    int64_t end = n - begin < SINPE_ROPE_BLOCK ? n : begin + SINPE_ROPE_BLOCK;
    rope_part(p, x, src, begin, end);
}

const sinpe_stage sinpe_rope_stages[1] = {
    { .items = rope_items, .work = rope_work, .run = rope_run },
};
