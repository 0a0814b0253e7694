/* The TABLE and ADD kinds (sinpe.h), whole: their rules (the destination's shape, positions,
 * offsets, presets, kept rows), a fresh table's shape, the plan's geometry, scratch and
 * memory, and four stages whose items threads share (sinpe_table_stages, in this order):
 *   0. positions that share memory with the destination are copied first (blocks of rows;
 *      NumPy's rule for outputs aliasing inputs);
 *   1. the divisors div[i] = exp((float)(2i) * c), one item per column block;
 *   2. the fill: the positions of kept rows (a cache) that this job computes into them
 *      first (kept.fill_first .. fill_end - 1), in blocks of rows;
 *   3. tiles: a block of rows x a block of columns x a block of the leading axes.  A tile
 *      computes its table rows once (into the destination when that is a plain float32
 *      table, else into per-thread scratch, kept while the next tile of the same thread
 *      needs the same rows) and stores or adds them to each element of its leading-axes
 *      block.
 * The rows themselves come from engine/rows.c (positions, angles, the backend's rows).
 */
#include "engine/engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/layout.h"

/* ---- the rules -------------------------------------------------------------------------- */

static int64_t table_cols(const sinpe_job *j)
{
    if (j->preset)
        return j->preset->ncol;
    return j->kind == SINPE_JOB_ADD ? j->dst.shape[j->dst.ndim - 1] : j->cols;
}

/* The rules of a preset table's description, given its columns. */
static int check_preset(const sinpe_job *j)
{
    const sinpe_preset *sp = j->preset;
    int64_t T = sp->nang, d = sp->ncol;
    if (T < 0 || d < 0 || (d > 0 && (T < 1 || !sp->col)) || (T > 0 && (!sp->freq) == (!sp->freq64)))
        return SINPE_E_PRESET;
    if (sp->ncomp < 1 || sp->ncomp > 2 || (sp->ncomp == 2 && j->pos.mode == SINPE_POS_OFFSET)
        || (sp->ncomp == 1 && j->pos.mode == SINPE_POS_GRID))
        return SINPE_E_PRESET;
    for (int64_t t = 0; sp->comp && t < T; t++)
        if (sp->comp[t] < 0 || sp->comp[t] >= sp->ncomp)
            return SINPE_E_PRESET;
    for (int64_t k = 0; k < d; k++)
        if (sp->col[k] < 0 || sp->col[k] / 4 >= T)
            return SINPE_E_PRESET;
    /* torch's tensor may leave out only a leading zero row (fairseq2's pad row) */
    if (sp->trow_shift != 0
        && !(sp->trow_shift == -1 && j->pos.mode == SINPE_POS_ARRAY && sp->zero_row == 0))
        return SINPE_E_PRESET;
    if (sp->ncomp == 2 && j->pos.mode == SINPE_POS_ARRAY
        && (j->pos.at.ndim < 1 || j->pos.at.shape[j->pos.at.ndim - 1] != 2))
        return SINPE_E_PRESET;
    return SINPE_OK;
}

/* A TABLE's own shape (the destination may add one leading axis of length 1). */
static int table_shape(const sinpe_job *j, int *nd, int64_t *shape)
{
    int64_t d = table_cols(j);
    if (j->pos.mode == SINPE_POS_ARRAY) {
        int pn = sinpe_pos_row_axes(j);
        if (pn < 0)
            return SINPE_E_PRESET;
        if (pn + 1 > SINPE_MAX_DIMS)
            return SINPE_E_DIMS;
        memcpy(shape, j->pos.at.shape, (size_t)pn * sizeof(int64_t));
        shape[pn] = d;
        *nd = pn + 1;
        return SINPE_OK;
    }
    int64_t rows = j->rows;
    if (j->pos.mode == SINPE_POS_GRID) {
        if (j->pos.grid_h < 0 || j->pos.grid_w < 0)
            return SINPE_E_ROWS;
        if (j->pos.grid_lead < 0)
            return SINPE_E_ROWS;
        if (j->pos.grid_w && j->pos.grid_h > (INT64_MAX - j->pos.grid_lead) / j->pos.grid_w)
            return SINPE_E_SIZE;
        rows = j->pos.grid_lead + j->pos.grid_h * j->pos.grid_w;
    }
    shape[0] = rows;
    shape[1] = d;
    *nd = 2;
    return SINPE_OK;
}

/* The rows a job writes: by offset its rows (an add's second-to-last axis), else every
 * position's. */
static int job_rows(const sinpe_job *j, int64_t *rows)
{
    const sinpe_array *x = &j->dst;
    if (j->pos.mode == SINPE_POS_OFFSET)
        *rows = j->kind == SINPE_JOB_ADD ? x->shape[x->ndim - 2] : j->rows;
    else
        *rows = sinpe_elements(x->ndim - 1, x->shape);
    return SINPE_OK;
}

/* By offset, the rows of the table torch evaluates in one call (table_rows, or offset + rows
 * when not given); -1 when its elements, rows * pairs, would pass int64: such rows are their
 * own tensor (plan: torch_tensor).  Not by offset, or with own_tensor, the rows themselves. */
static int64_t torch_rows(const sinpe_job *j, int64_t rows, int64_t pairs)
{
    if (j->pos.mode != SINPE_POS_OFFSET || j->own_tensor)
        return rows;
    int64_t whole = j->table_rows ? j->table_rows
                    : j->offset <= INT64_MAX - rows ? j->offset + rows : -1;
    return whole >= 0 && whole <= INT64_MAX / (pairs > 0 ? pairs : 1) ? whole : -1;
}

static int check_offset(const sinpe_job *j, int64_t len, int64_t d)
{
    if (j->offset < 0)
        return SINPE_E_OFFSET;
    if (len > 0 && j->offset > INT64_MAX - (len - 1))
        return SINPE_E_LASTPOS;
    if (j->table_rows < 0 || (!j->table_grow && j->table_rows != 0
                              && j->table_rows - len < j->offset))
        return SINPE_E_TABLE;
    if (d > 0 && j->table_rows > INT64_MAX / d) /* d = 0: an empty table, no size to pass */
        return SINPE_E_SIZE;
    return SINPE_OK;
}

/* The TABLE and ADD rules (the common ones are engine/job.c's). */
int sinpe_table_check(const sinpe_job *j)
{
    const sinpe_array *x = &j->dst;
    int add = j->kind == SINPE_JOB_ADD;
    if ((int)j->pos.mode < 0 || j->pos.mode > SINPE_POS_GRID || (add && j->pos.mode == SINPE_POS_GRID))
        return SINPE_E_FUNC;
    if (j->pos.mode == SINPE_POS_ARRAY && j->offset != 0)
        return SINPE_E_BOTH;
    if (add && x->ndim < 2)
        return SINPE_E_DIMS;
    if (!add && x->ndim < 1)
        return SINPE_E_SHAPE;
    int64_t d = table_cols(j), w = sinpe_type_size(x->type);
    if (j->preset) {
        int st = check_preset(j);
        if (st != SINPE_OK)
            return st;
    } else if (j->pos.mode == SINPE_POS_GRID) {
        return SINPE_E_PRESET; /* a grid's positions have two components */
    } else if (d < 2 || d % 2 != 0) {
        return SINPE_E_DMODEL;
    }
    if ((!add && j->pos.mode == SINPE_POS_OFFSET && j->rows < 0) || sinpe_check_axes(x) != SINPE_OK)
        return SINPE_E_ROWS;
    if (!j->preset && sinpe_check_base(j->base) != SINPE_OK)
        return SINPE_E_BASE;
    if (d > SINPE_MAX_SPAN / w)
        return SINPE_E_SIZE;
    if (!add) { /* the destination has the table's shape, or one more leading axis of 1 */
        int nd;
        int64_t shape[SINPE_MAX_DIMS];
        int st = table_shape(j, &nd, shape);
        if (st != SINPE_OK)
            return st;
        if (sinpe_bytes_of(nd, shape, w) < 0)
            return SINPE_E_SIZE;
        int lead = j->lead_one && x->ndim == nd + 1 && x->shape[0] == 1;
        if (x->ndim != nd + lead || memcmp(x->shape + lead, shape, (size_t)nd * sizeof(int64_t)))
            return SINPE_E_SHAPE;
    }
    if (sinpe_bytes_of(x->ndim, x->shape, w) < 0)
        return SINPE_E_SIZE;
    if (j->pos.mode == SINPE_POS_OFFSET) {
        int64_t len;
        job_rows(j, &len);
        int st = check_offset(j, len, d);
        if (st != SINPE_OK)
            return st;
    } else if (j->pos.mode == SINPE_POS_ARRAY) {
        int st = sinpe_positions_check(j);
        if (st != SINPE_OK)
            return st;
    }
    return SINPE_OK;
}

/* ---- kept rows: their rules ---------------------------------------------------------------- */

/* Kept rows (sinpe.h, sinpe_job.kept): a table job's own rows, in range, apart from dst;
 * read by positions only where the backend's results do not couple. */
static int kept_span(const sinpe_kept *k, int64_t *lo, int64_t *hi)
{
    *lo = k->fill_first;
    *hi = k->fill_end;
    if (k->ready_end <= k->ready_first)
        return SINPE_OK; /* no rows filled before */
    if (k->ready_first < k->first || k->ready_end - k->first > k->rows)
        return SINPE_E_KEPT;
    if (k->fill_end > k->fill_first
        && (k->fill_first > k->ready_end || k->ready_first > k->fill_end))
        return SINPE_E_KEPT; /* two intervals apart */
    if (k->fill_end <= k->fill_first || k->ready_first < *lo)
        *lo = k->ready_first;
    if (k->fill_end <= k->fill_first || k->ready_end > *hi)
        *hi = k->ready_end;
    return SINPE_OK;
}

/* The kept rows' rules, the backend's included (positions need results that do not couple). */
int sinpe_table_kept(const sinpe_job *j, const sinpe_backend_ops *be)
{
    const sinpe_kept *k = &j->kept;
    if (!k->data)
        return SINPE_OK;
    int64_t d = j->dst.ndim ? j->dst.shape[j->dst.ndim - 1] : 0, len = 0;
    if (j->preset || j->own_tensor
        || j->pos.mode == SINPE_POS_GRID || k->rows < 0 || k->stride < d
        || k->first < 0 || k->first > INT64_MAX - k->rows
        || k->fill_first < k->first || k->fill_end < k->fill_first
        || k->fill_end > k->first + k->rows
        || (k->rows > 0 && k->stride > SINPE_MAX_SPAN / 4 / k->rows))
        return SINPE_E_KEPT;
    int64_t rlo, rhi;
    if (kept_span(k, &rlo, &rhi) != SINPE_OK)
        return SINPE_E_KEPT;
    if (j->pos.mode == SINPE_POS_ARRAY && !be->independent)
        return SINPE_E_KEPT;
    /* the fill computes positions fill_first .. fill_end - 1 as rows of torch's tensor from
     * row 0: their elements must index in int64, and rows past that (their own tensor) are
     * not a cache's */
    int64_t pairs = d / 2 > 0 ? d / 2 : 1;
    if (k->fill_end > INT64_MAX / pairs)
        return SINPE_E_KEPT;
    if (j->pos.mode == SINPE_POS_OFFSET) {
        job_rows(j, &len);
        if (len > 0 && (j->offset < rlo || j->offset - rlo > rhi - rlo - len))
            return SINPE_E_KEPT;
        if (torch_rows(j, len, pairs) < 0)
            return SINPE_E_KEPT;
    }
    int64_t lo, hi;
    const sinpe_array *x = &j->dst;
    if (k->rows == 0 || j->fresh
        || sinpe_extent(x->ndim, x->shape, x->strides, sinpe_type_size(x->type), &lo, &hi) != SINPE_OK
        || lo == hi)
        return SINPE_OK;
    uintptr_t x0 = (uintptr_t)x->data + (uintptr_t)lo, x1 = (uintptr_t)x->data + (uintptr_t)hi;
    uintptr_t k0 = (uintptr_t)k->data, k1 = k0 + (uintptr_t)(k->rows * k->stride * 4);
    return k0 < x1 && x0 < k1 ? SINPE_E_KEPT : SINPE_OK;
}

/* ---- a complete job ------------------------------------------------------------------------- */

/* A fresh table's shape (adds work in place). */
int sinpe_table_fresh(sinpe_job *j)
{
    int st = sinpe_check_dst(&j->dst, j->want_type);
    if (st != SINPE_OK)
        return st;
    if ((int)j->pos.mode < 0 || j->pos.mode > SINPE_POS_GRID)
        return SINPE_E_FUNC;
    return table_shape(j, &j->dst.ndim, j->dst.shape);
}

/* A growing table (table_grow) whose rows' own table holds them: table_rows 0 (offset +
 * rows), before the check. */
void sinpe_table_complete(sinpe_job *j)
{
    if (!j->table_grow || j->pos.mode != SINPE_POS_OFFSET || j->table_rows < 0)
        return;
    int64_t len = 0;
    if (j->dst.ndim >= 2 || j->kind == SINPE_JOB_TABLE)
        job_rows(j, &len);
    if (j->table_rows - len < j->offset) /* the rows' own table holds them */
        j->table_rows = 0;
}

/* ---- the stages ------------------------------------------------------------------------------ */

static const float *kept_row(const sinpe_plan *p, int64_t position, int64_t j0);
static int kept_positions(const sinpe_plan *p, const float *pos, int64_t n);
static void emit_kept(const sinpe_plan *p, char *x, int64_t first, int64_t nr, int64_t j0,
                      int64_t rl, int64_t bb);

/* nr rows of rl values from pe (pe_stride floats apart) into x's rows: one emit when both
 * are contiguous runs (a whole tile of an element at once: no per-row call and alignment
 * steps; 64 x 64 x 256 adds took 1.2-1.4x np.add row by row), else row by row. */
static void emit_rows(const sinpe_plan *p, char *x, const float *pe, int64_t pe_stride,
                      int64_t nr, int64_t rl)
{
    if (nr > 1 && pe_stride == rl && p->row_stride == rl * p->em.cstride) {
        sinpe_emit(&p->em, x, pe, nr * rl);
        return;
    }
    for (int64_t r = 0; r < nr; r++)
        sinpe_emit(&p->em, x + r * p->row_stride, pe + r * pe_stride, rl);
}

static void run_tile(sinpe_plan *p, int64_t t, int tid)
{
    sinpe_slot *sl = &p->slots[tid];
    int64_t per_row_block = p->col_blocks * p->batch_blocks;
    int64_t rb = t / per_row_block, cb = (t % per_row_block) / p->batch_blocks;
    int64_t bb = t % p->batch_blocks;
    int64_t r0 = rb * p->tile_rows, nr = p->rows - r0 < p->tile_rows ? p->rows - r0 : p->tile_rows;
    int64_t j0 = cb * p->tile_pairs, nj = p->pairs - j0 < p->tile_pairs ? p->pairs - j0 : p->tile_pairs;
    int64_t rl = p->preset ? p->rowlen : 2 * nj; /* values per row of this tile */
    char *base = (char *)p->j.dst.data + 2 * j0 * p->em.cstride;
    if (p->j.pos.mode == SINPE_POS_OFFSET) {
        int64_t first = p->j.offset + r0, trow = p->j.own_tensor ? r0 : first; /* in torch's */
        if (p->j.kept.data) {
            emit_kept(p, base + r0 * p->row_stride, first, nr, j0, rl, bb);
            return;
        }
        if (p->direct) {
            sinpe_table_rows(p, sl, (float *)(void *)(base + r0 * p->row_stride), p->row_stride / 4, NULL,
                     first, trow, nr, cb);
            return;
        }
        int64_t key = rb * p->col_blocks + cb;
        if (sl->key != key) {
            sinpe_table_rows(p, sl, sl->pe, rl, NULL, first, trow, nr, cb);
            sl->key = key;
        }
        int64_t b0 = bb * p->tile_batch, nb = p->batch - b0 < p->tile_batch ? p->batch - b0 : p->tile_batch;
        sinpe_walker w;
        sinpe_walker_init(&w, p->lead_n, p->lead_shape, p->lead_strides, NULL, b0);
        for (int64_t b = 0; b < nb; b++, sinpe_walker_next(&w))
            emit_rows(p, base + w.o1 + r0 * p->row_stride, sl->pe, rl, nr, rl);
        return;
    }
    sinpe_walker w;
    sinpe_walker_init(&w, p->row_n, p->row_shape, p->row_dst, p->row_pos, r0);
    char *first = base + w.o1;
    for (int64_t r = 0; r < nr; r++, sinpe_walker_next(&w))
        for (int q = 0; q < p->ncomp; q++)
            sl->posf[r * p->ncomp + q] = sinpe_table_position(p, r0 + r, w.o2, q);
    if (p->direct) {
        sinpe_table_rows(p, sl, (float *)(void *)first, p->row_stride / 4, sl->posf, 0, r0, nr, cb);
        return;
    }
    int kept = kept_positions(p, sl->posf, nr);
    if (!kept)
        sinpe_table_rows(p, sl, sl->pe, rl, sl->posf, 0, r0, nr, cb);
    sinpe_walker_init(&w, p->row_n, p->row_shape, p->row_dst, p->row_pos, r0);
    for (int64_t r = 0; r < nr; r++, sinpe_walker_next(&w))
        sinpe_emit(&p->em, base + w.o1, kept ? kept_row(p, (int64_t)sl->posf[r], j0)
                                              : sl->pe + r * rl, rl);
    sl->key = -1;
}

/* Kept rows read by the tiles and filled by the fill stage (sinpe.h: sinpe_job.kept) ------ */

static const float *kept_row(const sinpe_plan *p, int64_t position, int64_t j0)
{
    return p->j.kept.data + (position - p->j.kept.first) * p->j.kept.stride + 2 * j0;
}

/* 1 when every one of the n positions is an integer whose row is kept. */
static int kept_positions(const sinpe_plan *p, const float *pos, int64_t n)
{
    const sinpe_kept *k = &p->j.kept;
    int64_t lo, hi; /* the rows filled (sinpe.h): never the buffer's other rows */
    if (!k->data || kept_span(k, &lo, &hi) != SINPE_OK || hi <= lo)
        return 0;
    for (int64_t r = 0; r < n; r++) {
        float q = pos[r];
        if (!(q >= (float)lo && q <= (float)hi) || q != (float)(int64_t)q
            || (int64_t)q < lo || (int64_t)q >= hi)
            return 0;
    }
    return 1;
}

/* A tile by offset from kept rows: rows first .. first + nr - 1, columns from 2 * j0, into
 * the tile's batch block bb of the destination (x: its first row in the first element). */
static void emit_kept(const sinpe_plan *p, char *x, int64_t first, int64_t nr, int64_t j0,
                      int64_t rl, int64_t bb)
{
    int64_t b0 = bb * p->tile_batch, nb = p->batch - b0 < p->tile_batch ? p->batch - b0 : p->tile_batch;
    sinpe_walker w;
    sinpe_walker_init(&w, p->lead_n, p->lead_shape, p->lead_strides, NULL, b0);
    for (int64_t b = 0; b < nb; b++, sinpe_walker_next(&w))
        emit_rows(p, x + w.o1, kept_row(p, first, j0), p->j.kept.stride, nr, rl);
}

/* The fill stage: positions kept.fill_first .. fill_end - 1 computed into the kept rows
 * (as this job's rows: the same tensor), fill_rows rows per item for each column block. */
static int64_t fill_items(const sinpe_plan *p)
{
    const sinpe_kept *k = &p->j.kept;
    return k->data ? sinpe_ceil_div(k->fill_end - k->fill_first, p->fill_rows) * p->col_blocks : 0;
}

static int64_t fill_work(const sinpe_plan *p)
{
    return p->fill_rows * p->rowlen;
}

static void run_fill(sinpe_plan *p, int64_t item, int tid)
{
    const sinpe_kept *k = &p->j.kept;
    int64_t rb = item / p->col_blocks, cb = item % p->col_blocks;
    int64_t r0 = k->fill_first + rb * p->fill_rows;
    int64_t nr = k->fill_end - r0 < p->fill_rows ? k->fill_end - r0 : p->fill_rows;
    int64_t j0 = cb * p->tile_pairs;
    sinpe_table_rows(p, &p->slots[tid], k->data + (r0 - k->first) * k->stride + 2 * j0, k->stride, NULL,
             r0, r0, nr, cb);
}

static void run_divisors(sinpe_plan *p, int64_t cb, int tid)
{
    (void)tid;
    int64_t j0 = cb * p->tile_pairs, nj = p->pairs - j0 < p->tile_pairs ? p->pairs - j0 : p->tile_pairs;
    float arg[SINPE_BLOCK];
    for (int64_t i0 = 0; i0 < nj; i0 += SINPE_BLOCK) {
        size_t n = (size_t)(nj - i0 < SINPE_BLOCK ? nj - i0 : SINPE_BLOCK);
        for (size_t i = 0; i < n; i++)
            arg[i] = (float)(2 * (j0 + i0 + (int64_t)i)) * p->c;
        p->be->exp(&p->ctx, j0 + i0, arg, p->div + j0 + i0, n);
    }
    float lo = INFINITY, hi = 0.0f;
    for (int64_t i = j0; i < j0 + nj; i++) {
        lo = p->div[i] < lo ? p->div[i] : lo;
        hi = p->div[i] > hi ? p->div[i] : hi;
    }
    p->dmin[cb] = lo;
    p->dmax[cb] = hi;
}

static void run_poscopy(sinpe_plan *p, int64_t item, int tid)
{
    (void)tid;
    int64_t r0 = item * SINPE_POS_BLOCK;
    int64_t n = p->npos - r0 < SINPE_POS_BLOCK ? p->npos - r0 : SINPE_POS_BLOCK;
    int64_t strides[SINPE_MAX_DIMS]; /* the positions' own, over the destination's rows */
    sinpe_broadcast_positions(&p->j, strides);
    sinpe_walker w;
    sinpe_walker_init(&w, p->j.dst.ndim - 1, p->j.dst.shape, strides, NULL, r0);
    for (int64_t r = 0; r < n; r++, sinpe_walker_next(&w))
        for (int q = 0; q < p->ncomp; q++)
            p->poscopy[(r0 + r) * p->ncomp + q] =
                sinpe_load_position(p->pos + w.o1 + q * p->comp_stride, p->j.pos.at.type);
}

static int64_t poscopy_items(const sinpe_plan *p)
{
    return p->tiles && p->npos ? sinpe_ceil_div(p->npos, SINPE_POS_BLOCK) : 0;
}

static int64_t poscopy_work(const sinpe_plan *p)
{
    (void)p;
    return SINPE_POS_BLOCK / SINPE_STORE_SHARE;
}

static int64_t divisor_items(const sinpe_plan *p)
{
    int computes = p->tiles && (!p->j.kept.data || p->j.pos.mode != SINPE_POS_OFFSET);
    return !p->preset && (computes || fill_items(p) > 0) ? p->col_blocks : 0;
}

static int64_t divisor_work(const sinpe_plan *p)
{
    return p->tile_pairs;
}

static int64_t tile_items(const sinpe_plan *p)
{
    return p->tiles;
}

/* Work of one tile: its table values, computed once per run of tiles with the same rows,
 * and the values it stores. */
static int64_t tile_work(const sinpe_plan *p)
{
    int64_t per = p->tile_rows * (p->rowlen > p->tile_pairs ? p->rowlen : p->tile_pairs);
    /* stores only: rows by offset, or by positions when every kept row is there already */
    if (p->j.kept.data && (p->j.pos.mode == SINPE_POS_OFFSET
                           || p->j.kept.fill_first >= p->j.kept.fill_end))
        return per * p->tile_batch / SINPE_KEPT_SHARE > 0 ? per * p->tile_batch / SINPE_KEPT_SHARE : 1;
    if (p->direct)
        return per > 0 ? per : 1;
    int64_t w = per / p->batch_blocks + per * p->tile_batch / SINPE_STORE_SHARE;
    return w > 0 ? w : 1;
}

const sinpe_stage sinpe_table_stages[4] = {
    { .items = poscopy_items, .work = poscopy_work, .run = run_poscopy },
    { .items = divisor_items, .work = divisor_work, .run = run_divisors },
    { .items = fill_items, .work = fill_work, .run = run_fill },
    { .items = tile_items, .work = tile_work, .run = run_tile },
};

/* ---- geometry and scratch ---------------------------------------------------------------- */

static int aligned_f32(const sinpe_array *x)
{
    if ((uintptr_t)x->data % 4)
        return 0;
    for (int k = 0; k < x->ndim; k++)
        if (x->shape[k] > 1 && x->strides[k] % 4)
            return 0;
    return 1;
}

/* 1 when the destination's rows (the merged row axes) lie at one stride, whatever the
 * positions' strides (a batch of positions broadcast along an axis keeps two row axes) */
static int uniform_rows(const sinpe_plan *p)
{
    for (int k = 0; k + 1 < p->row_n; k++)
        if (p->row_dst[k] != p->row_dst[k + 1] * p->row_shape[k + 1])
            return 0;
    return 1;
}

/* by positions: the row axes, merged, with the positions' strides (broadcast, or those of
 * their copy) */
static void rows_by_positions(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    p->row_n = j->dst.ndim - 1;
    int64_t rows = 1, contiguous = 4, pos_strides[SINPE_MAX_DIMS];
    int read = j->pos.mode == SINPE_POS_ARRAY && !p->npos; /* read in place */
    if (read)
        sinpe_broadcast_positions(j, pos_strides);
    for (int k = p->row_n - 1; k >= 0; k--) {
        p->row_shape[k] = j->dst.shape[k];
        p->row_dst[k] = j->dst.strides[k];
        p->row_pos[k] = read ? pos_strides[k] : contiguous;
        contiguous *= j->dst.shape[k] > 0 ? j->dst.shape[k] : 1;
        rows = j->dst.shape[k] == 0 ? 0 : rows * j->dst.shape[k];
    }
    p->rows = rows;
    if (rows > 0)
        p->row_n = sinpe_collapse(p->row_n, p->row_shape, p->row_dst, p->row_pos);
    p->batch = 1;
    p->direct = !p->em.add && p->em.fast && uniform_rows(p) && !j->kept.data;
    if (p->row_n == 0) { /* a single row */
        p->row_n = 1;
        p->row_shape[0] = 1;
        p->row_dst[0] = p->row_pos[0] = 0;
    }
    p->row_stride = p->row_dst[p->row_n - 1];
}

static void rows_by_offset(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    int nd = j->dst.ndim;
    p->rows = j->dst.shape[nd - 2];
    p->row_stride = j->dst.strides[nd - 2];
    p->lead_n = nd - 2;
    p->batch = 1;
    for (int k = 0; k < p->lead_n; k++) {
        p->lead_shape[k] = j->dst.shape[k];
        p->lead_strides[k] = j->dst.strides[k];
        p->batch *= j->dst.shape[k]; /* bounded: checked sizes (0 stays 0) */
    }
    if (p->batch > 0)
        p->lead_n = sinpe_collapse(p->lead_n, p->lead_shape, p->lead_strides, NULL);
    p->direct = !p->em.add && p->em.fast && p->batch == 1 && !j->kept.data;
}

/* The tensor torch evaluates in one call, in elements: by offset the table rows 0 ..
 * table_rows - 1 (offset + rows when not given), else the rows themselves.  A table from row
 * 0 whose elements would pass int64 cannot exist (no memory holds 2^63 floats), so rows past
 * that count as their own tensor, as with own_tensor (the job's rules bound rows * pairs). */
static void torch_tensor(sinpe_plan *p)
{
    sinpe_job *j = &p->j;
    int64_t trows = torch_rows(j, p->rows, p->pairs);
    if (trows < 0) {
        j->own_tensor = 1;
        trows = p->rows;
    }
    if (j->preset)
        trows += j->preset->trow_shift; /* 0, or -1 by positions: never past the rows */
    p->ctx.tensor_len = trows * p->pairs;
    p->ctx.exp_len = p->pairs; /* exp over the divisors: one vector of d/2 */
    p->ctx.exp_ndim = 1;
    p->ctx.exp_last = p->pairs;
}

static void table_geometry(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    int nd = j->dst.ndim;
    int64_t d = j->dst.shape[nd - 1];
    p->preset = j->preset;
    p->ncomp = sinpe_ncomp(j);
    if (j->pos.mode == SINPE_POS_ARRAY && p->ncomp > 1)
        p->comp_stride = j->pos.at.strides[j->pos.at.ndim - 1];
    if (j->preset) { /* one column block; rows per tile from the wider of angles and columns */
        p->pairs = p->tile_pairs = j->preset->nang;
        p->col_blocks = p->fill_rows = 1;
        p->rowlen = d;
        int64_t wide = d > p->tile_pairs ? d : p->tile_pairs > 0 ? p->tile_pairs : 1;
        p->tile_rows = 2 * SINPE_TILE_PAIRS / wide > 0 ? 2 * SINPE_TILE_PAIRS / wide : 1;
    } else {
        p->pairs = d / 2;
        p->tile_pairs = p->pairs < SINPE_TILE_PAIRS ? p->pairs : SINPE_TILE_PAIRS;
        p->col_blocks = sinpe_ceil_div(p->pairs, p->tile_pairs);
        p->rowlen = 2 * p->tile_pairs;
        p->tile_rows = p->fill_rows = SINPE_TILE_PAIRS / p->tile_pairs;
        if ((j->kind == SINPE_JOB_ADD || j->kept.data) && j->pos.mode == SINPE_POS_OFFSET)
            p->tile_rows = SINPE_ADD_VALUES / p->rowlen > 0 ? SINPE_ADD_VALUES / p->rowlen : 1;
    }
    p->em.type = j->dst.type;
    p->em.add = j->kind == SINPE_JOB_ADD;
    p->em.cstride = j->dst.strides[nd - 1];
    p->em.path = p->path;
    p->em.fast = j->dst.type == SINPE_F32 && p->em.cstride == 4 && aligned_f32(&j->dst);
    if (j->pos.mode == SINPE_POS_OFFSET)
        rows_by_offset(p);
    else
        rows_by_positions(p);
    if (p->tile_rows > p->rows)
        p->tile_rows = p->rows > 0 ? p->rows : 1;
    p->row_blocks = sinpe_ceil_div(p->rows, p->tile_rows);
    int64_t per = p->tile_rows * (p->rowlen > 0 ? p->rowlen : 1); /* a preset's may be 0 wide */
    p->tile_batch = SINPE_TILE_VALUES / per > 0 ? SINPE_TILE_VALUES / per : 1;
    if (p->tile_batch > p->batch)
        p->tile_batch = p->batch > 0 ? p->batch : 1;
    p->batch_blocks = sinpe_ceil_div(p->batch, p->tile_batch);
    p->tiles = p->rows && p->batch && d ? p->row_blocks * p->col_blocks * p->batch_blocks : 0;
    torch_tensor(p);
}

static int64_t table_threads(const sinpe_plan *p)
{
    if (p->tiles == 0)
        return 1;
    int64_t work = p->tiles * tile_work(p) / SINPE_MIN_THREAD_WORK;
    int t = p->o.threads;
    return work < 1 ? 1 : work < t ? work : t;
}

/* 1 when tiles compute their rows into a slot's scratch (not straight into the
 * destination, nor read from kept rows by offset). */
static int tile_scratch(const sinpe_plan *p)
{
    return !p->direct && !(p->j.kept.data && p->j.pos.mode == SINPE_POS_OFFSET);
}

/* The scratch in floats: divisors and their column blocks' ranges, per-slot rows and
 * positions, copied positions.  A job with no tiles may still fill the cache's rows (an x
 * with an empty leading axis): the fill stage needs the divisors and a slot too. */
int64_t sinpe_table_scratch(const sinpe_plan *p)
{
    if ((p->tiles == 0 && fill_items(p) == 0) || p->nslots == 0)
        return 0;
    int64_t per_slot = p->tile_rows * p->ncomp
                       + (tile_scratch(p) ? p->tile_rows * p->rowlen + SINPE_ALIGN_FLOATS : 0)
                       + (p->preset ? 3 * p->tile_rows * p->tile_pairs : 0);
    return p->pairs + 2 * p->col_blocks + (int64_t)p->nslots * per_slot + p->npos * p->ncomp;
}

/* The first float at or after m whose address is congruent to data's modulo 64 bytes
 * (data's modulo 4 is ignored: unaligned float32 outputs take the slow emitters). */
static float *align_like(float *m, const void *data)
{
    uintptr_t want = ((uintptr_t)data / 4) % SINPE_ALIGN_FLOATS;
    uintptr_t have = ((uintptr_t)m / 4) % SINPE_ALIGN_FLOATS;
    return m + (want + SINPE_ALIGN_FLOATS - have) % SINPE_ALIGN_FLOATS;
}

static void scratch_assign(sinpe_plan *p, float *m)
{
    p->div = m;
    m += p->pairs;
    p->dmin = m;
    m += p->col_blocks;
    p->dmax = m;
    m += p->col_blocks;
    for (int t = 0; t < p->nslots; t++) {
        sinpe_slot *sl = &p->slots[t];
        sl->posf = m;
        m += p->tile_rows * p->ncomp;
        if (tile_scratch(p)) {
            sl->pe = align_like(m, p->j.dst.data);
            m += p->tile_rows * p->rowlen + SINPE_ALIGN_FLOATS;
        }
        if (p->preset) {
            sl->wa = m;
            sl->ws = m + p->tile_rows * p->tile_pairs;
            sl->wc = m + 2 * p->tile_rows * p->tile_pairs;
            m += 3 * p->tile_rows * p->tile_pairs;
        }
        sl->key = -1;
    }
    p->poscopy = p->npos ? m : NULL;
}

/* ---- the plan ----------------------------------------------------------------------------- */

/* A table's or an add's plan laid out: geometry, threads, the backend's view; nothing
 * allocated (engine/job.c sizes a job's scratch by it too, on a plan on its stack). */
void sinpe_table_layout(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    p->c = (float)(-log(j->base) / (double)j->dst.shape[j->dst.ndim - 1]);
    p->npos = sinpe_positions_alias(j) ? sinpe_elements(j->dst.ndim - 1, j->dst.shape) : 0;
    p->pos = j->pos.at.data;
    table_geometry(p);
    p->nslots = (int)table_threads(p);
    p->ctx.argument = sinpe_table_argument;
    p->ctx.src = p;
}

/* A table's memory: the preset's program, the slots, then the floats (slots are a multiple
 * of 8 bytes). */
int sinpe_table_alloc(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    if (j->preset && sinpe_preset_compile(j->preset, j->preset->ncol, p->be->independent,
                                          &p->prog) != SINPE_OK)
        return SINPE_E_NOMEM;
    int64_t nf = sinpe_table_scratch(p);
    if (nf > 0) {
        size_t head = (size_t)p->nslots * sizeof(sinpe_slot);
        if ((uint64_t)nf > (SIZE_MAX - head) / sizeof(float)
            || !(p->mem = malloc(head + (size_t)nf * sizeof(float))))
            return SINPE_E_NOMEM;
        p->slots = p->mem;
        scratch_assign(p, (float *)(void *)((char *)p->mem + head));
    }
    return SINPE_OK;
}

/* A fresh destination bound (sinpe_plan_bind): the slots' rows aligned like its data. */
void sinpe_table_bind(sinpe_plan *p)
{
    size_t head = (size_t)p->nslots * sizeof(sinpe_slot);
    if (p->mem)
        scratch_assign(p, (float *)(void *)((char *)p->mem + head));
}

/* What the table's memory holds besides p->mem: the preset's program. */
void sinpe_table_release(sinpe_plan *p)
{
    sinpe_preset_prog_free(&p->prog);
}
