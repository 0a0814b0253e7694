/* A table's positions and rows (TABLE and ADD jobs, engine/table.c): the positions' layout
 * and rules (components, broadcasting, extent, aliasing), the position of each row, the angle
 * tensor torch evaluates (the backends' argument function), and rows of sin/cos pairs or of a
 * preset's columns computed by the backend: in one pass where it has one (the built-in paths'
 * rows), else from the angles through its sincos, in blocks placed in torch's tensor (SLEEF's
 * vectors depend on where they start).  It reads a laid-out plan and writes only the rows it
 * is given; the stages that call it are table.c's.
 */
#include "engine/engine.h"

#include <math.h>
#include <string.h>

#include "engine/layout.h"

/* ---- positions ------------------------------------------------------------------------------ */

/* Components per position: 2 on a grid or with a 2-d preset, else 1. */
int sinpe_ncomp(const sinpe_job *j)
{
    if (j->pos.mode == SINPE_POS_GRID)
        return 2;
    return j->preset && j->preset->ncomp > 1 ? j->preset->ncomp : 1;
}

/* The row axes of the positions array (its last axis holds 2 components). */
int sinpe_pos_row_axes(const sinpe_job *j)
{
    return j->pos.at.ndim - (sinpe_ncomp(j) > 1);
}

/* Strides (bytes) of the positions broadcast to the destination's row axes; -1 when their
 * shapes do not broadcast to exactly those axes. */
int sinpe_broadcast_positions(const sinpe_job *j, int64_t *strides)
{
    int n = j->dst.ndim - 1, pn = sinpe_pos_row_axes(j);
    if (pn > n)
        return -1;
    for (int i = 0; i < n; i++) {
        int k = i - (n - pn);
        int64_t want = j->dst.shape[i];
        if (k < 0)
            strides[i] = 0;
        else if (j->pos.at.shape[k] == want)
            strides[i] = want == 1 ? 0 : j->pos.at.strides[k];
        else if (j->pos.at.shape[k] == 1)
            strides[i] = 0;
        else
            return -1;
    }
    return 0;
}

/* The positions' extent in bytes, over the destination's row axes (and the components). */
static int positions_extent(const sinpe_job *j, int64_t *lo, int64_t *hi)
{
    int n = j->dst.ndim - 1;
    int64_t shape[SINPE_MAX_DIMS + 1], strides[SINPE_MAX_DIMS + 1];
    memcpy(shape, j->dst.shape, (size_t)n * sizeof(int64_t));
    if (sinpe_broadcast_positions(j, strides) < 0)
        return SINPE_E_BROADCAST;
    if (sinpe_ncomp(j) > 1) {
        shape[n] = 2;
        strides[n] = j->pos.at.strides[j->pos.at.ndim - 1];
        n++;
    }
    return sinpe_extent(n, shape, strides, sinpe_type_size(j->pos.at.type), lo, hi);
}

/* The positions' rules: their type, axes, broadcasting to the rows, memory. */
int sinpe_positions_check(const sinpe_job *j)
{
    const sinpe_array *p = &j->pos.at;
    if ((int)p->type < 0 || p->type >= SINPE_TYPE_COUNT)
        return SINPE_E_TYPE;
    if (p->ndim < 0 || p->ndim > SINPE_MAX_DIMS)
        return SINPE_E_DIMS;
    int64_t strides[SINPE_MAX_DIMS];
    if (sinpe_broadcast_positions(j, strides) < 0)
        return SINPE_E_BROADCAST;
    int64_t lo, hi;
    int st = positions_extent(j, &lo, &hi);
    if (st != SINPE_OK)
        return st;
    if (lo != hi && !p->data)
        return SINPE_E_NULL;
    return SINPE_OK;
}

/* 1 when the positions' bytes and the destination's bytes intersect. */
int sinpe_positions_alias(const sinpe_job *j)
{
    if (j->pos.mode != SINPE_POS_ARRAY || !j->pos.at.data || !j->dst.data)
        return 0;
    const sinpe_array *x = &j->dst;
    int64_t dlo, dhi, plo, phi;
    if (sinpe_extent(x->ndim, x->shape, x->strides, sinpe_type_size(x->type), &dlo, &dhi)
            != SINPE_OK
        || positions_extent(j, &plo, &phi) != SINPE_OK)
        return 1;
    if (dlo == dhi || plo == phi)
        return 0;
    uintptr_t d0 = (uintptr_t)x->data, p0 = (uintptr_t)j->pos.at.data;
    uintptr_t da = d0 + (uintptr_t)dlo, db = d0 + (uintptr_t)dhi;
    uintptr_t pa = p0 + (uintptr_t)plo, pb = p0 + (uintptr_t)phi;
    return pa < db && da < pb;
}

/* Component q of the position of row r (flat index over the row axes) whose position is at
 * byte offset off of the positions array. */
float sinpe_table_position(const sinpe_plan *p, int64_t r, int64_t off, int q)
{
    if (p->j.pos.mode == SINPE_POS_GRID) {
        int64_t g = r - p->j.pos.grid_lead, w = p->j.pos.grid_w;
        return g < 0 ? 0.0f : (float)(q == 0 ? g / w : g % w);
    }
    if (p->npos)
        return p->poscopy[r * p->ncomp + q];
    return sinpe_load_position(p->pos + off + q * p->comp_stride, p->j.pos.at.type);
}

/* Component q of the position of row `row` of the table (a flat row index over the job's
 * row axes when not by offset). */
static float table_position(const sinpe_plan *p, int64_t row, int q)
{
    if (p->j.pos.mode == SINPE_POS_OFFSET)
        return (float)(p->j.own_tensor ? p->j.offset + row : row);
    if (p->j.pos.mode == SINPE_POS_GRID || p->npos)
        return sinpe_table_position(p, row, 0, q);
    sinpe_walker w;
    sinpe_walker_init(&w, p->row_n, p->row_shape, p->row_dst, p->row_pos, row);
    return sinpe_table_position(p, row, w.o2, q);
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

/* nrows rows into out (ostride floats apart), columns of column block cb: a preset's, the
 * backend's rows, or pairs through its sincos. */
void sinpe_table_rows(const sinpe_plan *p, sinpe_slot *sl, float *out, ptrdiff_t ostride,
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
