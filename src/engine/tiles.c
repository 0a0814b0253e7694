/* Tables and in-place adds (TABLE and ADD jobs), in four stages whose items threads share
 * (sinpe_table_stages, in this order):
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
 * Rows come from the backend: in one pass where it has one (the built-in paths' rows),
 * else from the angles through its sincos, in blocks placed in torch's tensor (SLEEF's
 * vectors depend on where they start).
 */
#include "engine/engine.h"

#include <math.h>
#include <string.h>

#include "engine/layout.h"

/* ---- positions and angles -------------------------------------------------------------- */

static float position_at(const sinpe_plan *p, int64_t r, int64_t off, int q);

/* Component q of the position of row `row` of the table (a flat row index over the job's
 * row axes when not by offset). */
static float table_position(const sinpe_plan *p, int64_t row, int q)
{
    if (p->j.pos.mode == SINPE_POS_OFFSET)
        return (float)(p->j.own_tensor ? p->j.offset + row : row);
    if (p->j.pos.mode == SINPE_POS_GRID || p->npos)
        return position_at(p, row, 0, q);
    sinpe_walker w;
    sinpe_walker_init(&w, p->row_n, p->row_shape, p->row_dst, p->row_pos, row);
    return position_at(p, row, w.o2, q);
}

/* Component q of the position of row r (flat index over the row axes) whose position is at
 * byte offset off of the positions array. */
static float position_at(const sinpe_plan *p, int64_t r, int64_t off, int q)
{
    if (p->j.pos.mode == SINPE_POS_GRID) {
        int64_t g = r - p->j.pos.grid_lead, w = p->j.pos.grid_w;
        return g < 0 ? 0.0f : (float)(q == 0 ? g / w : g % w);
    }
    if (p->npos)
        return p->poscopy[r * p->ncomp + q];
    return sinpe_load_position(p->pos + off + q * p->comp_stride, p->j.pos.at.type);
}

/* Element f of the angle tensor torch evaluates (rows of pairs, or of a preset's angles):
 * the backends' argument function (SLEEF reads the elements of a vector around a block). */
float sinpe_table_argument(const void *plan, int64_t f)
{
    const sinpe_plan *p = plan;
    int64_t row = f / p->pairs, t = f % p->pairs;
    const sinpe_preset *sp = p->preset;
    if (!sp)
        return table_position(p, row, 0) * p->div[t];
    float v = table_position(p, row - sp->trow_shift, sp->comp ? sp->comp[t] : 0) * sp->freq[t];
    return sp->scaled ? sp->scale * v : v;
}

/* ---- rows ---------------------------------------------------------------------------------- */

/* Rows through the backend's sincos: angles in blocks of SINPE_BLOCK, each block a run of
 * consecutive elements of torch's tensor (element (row, t) is row * pairs + t, table_row0
 * the first row's there; first_row its position by offset): flat over the rows when a tile
 * spans every column, else row by row. */
static void sincos_rows(const sinpe_plan *p, float *out, ptrdiff_t ostride, const float *pos,
                        int64_t first_row, int64_t table_row0, int64_t nrows, int64_t j0,
                        int64_t nj)
{
    float a[SINPE_BLOCK], s[SINPE_BLOCK], c[SINPE_BLOCK];
    const float *div = p->div + j0;
    int64_t span = nj == p->pairs ? nrows * nj : nj; /* the elements of one run */
    for (int64_t r0 = 0; r0 < nrows; r0 += span / nj) {
        int64_t row = r0, col = 0;
        for (int64_t e = 0; e < span; e += SINPE_BLOCK) {
            size_t n = (size_t)(span - e < SINPE_BLOCK ? span - e : SINPE_BLOCK);
            int64_t row_first = row, col_first = col;
            for (size_t i = 0; i < n;) { /* the block's angles, row after row */
                size_t run = (size_t)(nj - col) < n - i ? (size_t)(nj - col) : n - i;
                float q = pos ? pos[row] : (float)(first_row + row);
                for (size_t k = 0; k < run; k++)
                    a[i + k] = q * div[col + (int64_t)k];
                i += run;
                col += (int64_t)run;
                if (col == nj) {
                    col = 0;
                    row++;
                }
            }
            p->be->sincos(&p->ctx, (table_row0 + row_first) * p->pairs + j0 + col_first, a, s,
                          c, n);
            row = row_first;
            col = col_first;
            for (size_t i = 0; i < n;) {
                size_t run = (size_t)(nj - col) < n - i ? (size_t)(nj - col) : n - i;
                p->path->interleave(s + i, c + i, out + (ptrdiff_t)row * ostride + 2 * col, run);
                i += run;
                col += (int64_t)run;
                if (col == nj) {
                    col = 0;
                    row++;
                }
            }
        }
    }
}

/* A preset's float32 angles of nr rows (row r at position pos[r * ncomp + q], or
 * (float)(first + r) by offset). */
static void preset_angles(const sinpe_plan *p, const float *pos, int64_t first, int64_t nr,
                          float *a)
{
    const sinpe_preset *sp = p->preset;
    const sinpe_preset_prog *pr = &p->prog;
    int64_t T = pr->K;
    const float *f = pr->freq;
    const int32_t *comp = p->ncomp > 1 ? pr->comp : NULL; /* (one component: all 0) */
    for (int64_t r = 0; r < nr; r++) {
        float p0 = pos ? pos[r * p->ncomp] : (float)(first + r);
        float p1 = pos && p->ncomp > 1 ? pos[r * p->ncomp + 1] : 0.0f;
        float *ar = a + r * T;
        /* branch-free inner loops (a row's loop with a branch per value took as long as its
         * sines: hf_rope at 300 positions) */
        if (comp)
            for (int64_t t = 0; t < T; t++)
                ar[t] = (comp[t] ? p1 : p0) * f[t];
        else
            p->path->scale(ar, f, p0, (size_t)T);
        if (sp->scaled)
            for (int64_t t = 0; t < T; t++)
                ar[t] = sp->scale * ar[t];
    }
}

/* A preset's float64 angles of nr rows, their sines and cosines (the C library's), each
 * rounded to float32. */
static void preset_f64(const sinpe_plan *p, const float *pos, int64_t first, int64_t nr,
                       float *a, float *s, float *c)
{
    const sinpe_preset *sp = p->preset;
    const sinpe_preset_prog *pr = &p->prog;
    int64_t T = pr->K;
    for (int64_t r = 0; r < nr; r++) {
        double p0 = pos ? (double)pos[r * p->ncomp] : (double)(first + r);
        double p1 = pos && p->ncomp > 1 ? (double)pos[r * p->ncomp + 1] : 0.0;
        for (int64_t t = 0; t < T; t++) {
            double v = pr->comp && pr->comp[t] ? p1 : p0;
            double x = sp->f64_div ? v / pr->freq64[t] : v * pr->freq64[t];
            a[r * T + t] = (float)x;
            s[r * T + t] = (float)sin(x);
            c[r * T + t] = (float)cos(x);
        }
    }
}

/* Rows of a preset table: angles, their sin and cos on the backend, then each column
 * picked from them. */
static void preset_rows(const sinpe_plan *p, sinpe_slot *sl, float *out, ptrdiff_t ostride,
                        const float *pos, int64_t first, int64_t table_row0, int64_t nr)
{
    const sinpe_preset *sp = p->preset;
    const sinpe_preset_prog *pr = &p->prog;
    int64_t T = pr->K, n = nr * T;
    float *a = sl->wa, *s = sl->ws, *c = sl->wc;
    if (sp->freq64) {
        preset_f64(p, pos, first, nr, a, s, c);
    } else {
        preset_angles(p, pos, first, nr, a);
        if (pr->need_s || pr->need_c) {
            int64_t skip = table_row0 + sp->trow_shift < 0 ? T : 0; /* the pad row: zeros */
            for (int64_t i = skip; i < n; i += SINPE_BLOCK) {
                size_t m = (size_t)(n - i < SINPE_BLOCK ? n - i : SINPE_BLOCK);
                p->be->sincos(&p->ctx, (table_row0 + sp->trow_shift) * T + i, a + i,
                              pr->need_s ? s + i : NULL, pr->need_c ? c + i : NULL, m);
            }
        }
    }
    for (int64_t r = 0; r < nr; r++) {
        float *dst = out + (ptrdiff_t)r * ostride;
        if ((pos ? table_row0 : first) + r == sp->zero_row) /* by offset: the position */
            memset(dst, 0, (size_t)p->rowlen * sizeof(float));
        else
            sinpe_preset_gather(pr, p->path, dst, a + r * T, s + r * T, c + r * T);
        if (sp->out_scaled)
            for (int64_t k = 0; k < p->rowlen; k++)
                dst[k] = dst[k] * sp->out_scale;
    }
}

static void rows_out(const sinpe_plan *p, sinpe_slot *sl, float *out, ptrdiff_t ostride,
                     const float *pos, int64_t first_row, int64_t table_row0, int64_t nrows,
                     int64_t cb)
{
    if (p->preset) {
        preset_rows(p, sl, out, ostride, pos, first_row, table_row0, nrows);
        return;
    }
    int64_t j0 = cb * p->tile_pairs, nj = p->pairs - j0 < p->tile_pairs ? p->pairs - j0 : p->tile_pairs;
    if (p->be->rows)
        p->be->rows(&p->ctx, out, ostride, pos, first_row, nrows, p->div + j0, nj, p->dmin[cb],
                    p->dmax[cb]);
    else
        sincos_rows(p, out, ostride, pos, first_row, table_row0, nrows, j0, nj);
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
            rows_out(p, sl, (float *)(void *)(base + r0 * p->row_stride), p->row_stride / 4, NULL,
                     first, trow, nr, cb);
            return;
        }
        int64_t key = rb * p->col_blocks + cb;
        if (sl->key != key) {
            rows_out(p, sl, sl->pe, rl, NULL, first, trow, nr, cb);
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
            sl->posf[r * p->ncomp + q] = position_at(p, r0 + r, w.o2, q);
    if (p->direct) {
        rows_out(p, sl, (float *)(void *)first, p->row_stride / 4, sl->posf, 0, r0, nr, cb);
        return;
    }
    int kept = kept_positions(p, sl->posf, nr);
    if (!kept)
        rows_out(p, sl, sl->pe, rl, sl->posf, 0, r0, nr, cb);
    sinpe_walker_init(&w, p->row_n, p->row_shape, p->row_dst, p->row_pos, r0);
    for (int64_t r = 0; r < nr; r++, sinpe_walker_next(&w))
        sinpe_emit(&p->em, base + w.o1, kept ? kept_row(p, (int64_t)sl->posf[r], j0)
                                              : sl->pe + r * rl, rl);
    sl->key = -1;
}

/* Kept rows (sinpe.h: sinpe_job.kept) ---------------------------------------------------- */

static const float *kept_row(const sinpe_plan *p, int64_t position, int64_t j0)
{
    return p->j.kept.data + (position - p->j.kept.first) * p->j.kept.stride + 2 * j0;
}

/* 1 when every one of the n positions is an integer whose row is kept. */
static int kept_positions(const sinpe_plan *p, const float *pos, int64_t n)
{
    const sinpe_kept *k = &p->j.kept;
    int64_t lo, hi; /* the rows filled (sinpe.h): never the buffer's other rows */
    if (!k->data || sinpe_kept_span(k, &lo, &hi) != SINPE_OK || hi <= lo)
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
    rows_out(p, &p->slots[tid], k->data + (r0 - k->first) * k->stride + 2 * j0, k->stride, NULL,
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
    int64_t trows = sinpe_job_torch_rows(j, p->rows, p->pairs);
    if (trows < 0) {
        j->own_tensor = 1;
        trows = p->rows;
    }
    if (j->preset)
        trows += j->preset->trow_shift; /* 0, or -1 by positions: never past the rows */
    p->ctx.tensor_len = trows * p->pairs;
    p->ctx.exp_len = p->pairs; /* exp over the divisors: one vector of d/2 */
    p->ctx.exp_ndim = 1;
}

void sinpe_table_geometry(sinpe_plan *p)
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

int64_t sinpe_table_threads(const sinpe_plan *p)
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
int64_t sinpe_table_scratch_floats(const sinpe_plan *p)
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

void sinpe_table_scratch_assign(sinpe_plan *p, float *m)
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
