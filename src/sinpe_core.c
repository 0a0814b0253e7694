/* sinpe core: validation of jobs, divisors, threads, the choice of backend
 * and code path, and the tiled runner.  Entry point of the pure-C core
 * (sinpe_core.h).
 *
 * A job runs in three stages, each cut into items that threads share:
 *   0. positions that share memory with the destination are copied first
 *      (blocks of rows; NumPy's rule for outputs aliasing inputs);
 *   1. the divisors div[i] = exp((float)(2i) * c), one item per column block;
 *   2. tiles: a block of rows x a block of columns x a block of the leading
 *      axes.  A tile computes its table rows once (into the destination
 *      when that is a plain float32 table, else into per-thread scratch,
 *      kept while the next tile of the same thread needs the same rows)
 *      and stores or adds them to each element of its leading-axes block.
 * sinpe_plan_step runs one stage's next items, up to a budget of values,
 * so a caller can check for interrupts between steps.
 */
#include "sinpe_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
#else
#include <unistd.h>
#endif

#include "sinpe_kernels.h"
#include "sinpe_layout.h"
#include "sinpe_mkl.h"
#include "sinpe_paths.h"
#include "sinpe_sleef.h"
#include "sinpe_spec.h"
#include "sinpe_store.h"
#include "sinpe_verified.h"
#include "sinpe_threads.h"

/* Columns per tile (pairs): 4096 pairs = 8192 floats = 32 KiB of scratch. */
#define SINPE_TILE_PAIRS 4096
/* Values per tile, about, counting the leading-axes block. */
#define SINPE_TILE_VALUES 65536
/* Values of PE rows per tile when adding to a batch: 512 KiB, inside a core's L2
 * (1 MiB on Zen 4/5 and recent Xeons), so that each batch is streamed in long
 * contiguous runs (measured on Zen 5: 32 KiB runs with jumps between batches
 * cost 5.1 ms for 128 MiB against 4.0 ms for 512 KiB runs; see the README). */
#define SINPE_ADD_VALUES 131072
/* Floats of slack per slot, to give each PE scratch the output's offset modulo
 * 64 bytes (then the add kernels, which align their stores, load PE aligned). */
#define SINPE_ALIGN_FLOATS 16
/* Work is counted in units of about one table value computed (storing or
 * adding a value costs about 1/8 of one); a thread gets at least this much,
 * so that small calls stay on the calling thread (starting a thread costs
 * about as much as 20000 values). */
#define SINPE_MIN_THREAD_WORK 65536
#define SINPE_STORE_SHARE 8
/* Rows per position-copy item; angles per oneMKL call. */
#define SINPE_POS_BLOCK 16384
#define SINPE_BLOCK 2048

const char *sinpe_strerror(int status)
{
    switch (status) {
    case SINPE_OK: return "ok";
    case SINPE_E_DMODEL: return "d_model must be an even integer >= 2";
    case SINPE_E_ROWS: return "the number of rows must be >= 0";
    case SINPE_E_BASE: return "base must be finite and > 0";
    case SINPE_E_OFFSET: return "offset must be >= 0";
    case SINPE_E_LASTPOS: return "the last position (offset + rows - 1) does not fit in int64";
    case SINPE_E_SIZE: return "more bytes than memory can address";
    case SINPE_E_NOMEM: return "out of memory for scratch space";
    case SINPE_E_BACKEND: return "backend unknown or not loaded";
    case SINPE_E_NULL: return "NULL pointer where memory is needed";
    case SINPE_E_LOAD: return "the backend library could not be loaded";
    case SINPE_E_PATH: return "code path unknown or not supported on this build or CPU";
    case SINPE_E_TYPE: return "element type not supported there";
    case SINPE_E_DIMS: return "too few or too many axes";
    case SINPE_E_OVERLAP: return "two elements of the destination share memory";
    case SINPE_E_UNDECIDED: return "could not decide whether the destination's elements overlap";
    case SINPE_E_FUNC: return "unknown elementwise function";
    case SINPE_E_THREADS: return "threads must be between 1 and 256";
    case SINPE_E_TABLE: return "the table (table_rows) must hold rows offset .. offset + rows - 1";
    case SINPE_E_SPEC: return "inconsistent preset table description";
    default: return "unknown sinpe status";
    }
}

/* ---- code paths: the one place that picks a table ------------------------- */

static const sinpe_path_ops *const PATHS[SINPE_PATH_COUNT] = {
    &sinpe_path_scalar,
#ifdef SINPE_HAVE_AVX2_PATH
    &sinpe_path_avx2,
#else
    NULL,
#endif
#ifdef SINPE_HAVE_NEON_PATH
    &sinpe_path_neon,
#else
    NULL,
#endif
#ifdef SINPE_HAVE_AVX512_PATH
    &sinpe_path_avx512,
#else
    NULL,
#endif
};

/* Whether the probe may choose a path by itself: only paths with a passed exhaustive check
 * (src/sinpe_verified.h); the others can be forced. */
static int path_verified(sinpe_path p)
{
    return p != SINPE_PATH_AVX512 || SINPE_VERIFIED_AVX512;
}

const sinpe_path_ops *sinpe_path_ops_get(sinpe_path p)
{
    /* probed once per process; a race only repeats the same answer */
    static int probed[SINPE_PATH_COUNT]; /* 0 unknown, 1 yes, 2 no */
    if ((int)p < 0 || p >= SINPE_PATH_COUNT || !PATHS[p])
        return NULL;
    if (!probed[p])
        probed[p] = PATHS[p]->supported() ? 1 : 2;
    return probed[p] == 1 ? PATHS[p] : NULL;
}

int sinpe_path_available(sinpe_path p)
{
    return sinpe_path_ops_get(p) != NULL;
}

sinpe_path sinpe_path_best(void)
{
    for (int p = SINPE_PATH_COUNT - 1; p > 0; p--)
        if (sinpe_path_available((sinpe_path)p) && path_verified((sinpe_path)p))
            return (sinpe_path)p;
    return SINPE_PATH_SCALAR;
}

const char *sinpe_path_name(sinpe_path p)
{
    static const char *names[SINPE_PATH_COUNT] = { "scalar", "avx2", "neon", "avx512" };
    return (int)p >= 0 && p < SINPE_PATH_COUNT ? names[p] : "unknown";
}

/* ---- backends: exp blocks and table rows ----------------------------------- */

/* The VML library of a backend, or -1 for the built-in kernels. */
static int vml_of(sinpe_backend be)
{
    return be == SINPE_BACKEND_MKL ? SINPE_VML_MKL : be == SINPE_BACKEND_TORCH ? SINPE_VML_TORCH : -1;
}

static void exp_block(sinpe_backend be, const float *in, float *out, size_t n)
{
    if (vml_of(be) >= 0) {
        sinpe_vml_map((sinpe_vml)vml_of(be), 0, in, out, n);
        return;
    }
    if (be == SINPE_BACKEND_SLEEF) { /* u10 exp: lane-independent, no grouping */
        sinpe_sleef_exp(in, out, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        out[i] = sinpe_expf(in[i]);
}

/* oneMKL rows: the (row, column) pairs are walked as one flat sequence in
 * blocks of SINPE_BLOCK angles, so narrow tables still make full calls
 * (oneMKL's results do not depend on how an array is cut: README). */
static void vml_rows(sinpe_vml lib, const sinpe_path_ops *path, float *out, ptrdiff_t ostride,
                     const float *pos, int64_t first_row, int64_t nrows, const float *div,
                     int64_t half)
{
    float a[SINPE_BLOCK], s[SINPE_BLOCK], c[SINPE_BLOCK];
    int64_t total = nrows * half, row = 0, col = 0;
    for (int64_t e0 = 0; e0 < total; e0 += SINPE_BLOCK) {
        size_t n = (size_t)(total - e0 < SINPE_BLOCK ? total - e0 : SINPE_BLOCK);
        int64_t row0 = row, col0 = col;
        for (size_t i = 0; i < n;) {
            size_t run = (size_t)(half - col) < n - i ? (size_t)(half - col) : n - i;
            float p = pos ? pos[row] : (float)(first_row + row);
            for (size_t r = 0; r < run; r++)
                a[i + r] = p * div[col + (int64_t)r];
            i += run;
            col += (int64_t)run;
            if (col == half) {
                col = 0;
                row++;
            }
        }
        sinpe_vml_map(lib, 1, a, s, n);
        sinpe_vml_map(lib, 2, a, c, n);
        row = row0;
        col = col0;
        for (size_t i = 0; i < n;) {
            size_t run = (size_t)(half - col) < n - i ? (size_t)(half - col) : n - i;
            path->interleave(s + i, c + i, out + (ptrdiff_t)row * ostride + 2 * col, run);
            i += run;
            col += (int64_t)run;
            if (col == half) {
                col = 0;
                row++;
            }
        }
    }
}

/* ---- jobs: every rule in one place ---------------------------------------------- */

int sinpe_type_size(sinpe_type t)
{
    static const int size[SINPE_TYPE_COUNT] = { 4, 8, 2, 2, 1, 2, 4, 8, 1, 2, 4, 8 };
    return (int)t >= 0 && t < SINPE_TYPE_COUNT ? size[t] : 0;
}

void sinpe_job_init(sinpe_job *j, void *data, int ndim, const int64_t *shape, double base)
{
    memset(j, 0, sizeof *j);
    j->data = data;
    j->type = SINPE_F32;
    j->ndim = ndim < 0 ? 0 : ndim > SINPE_MAX_DIMS ? SINPE_MAX_DIMS : ndim;
    int64_t stride = 4; /* C order, saturated (sinpe_job_check refuses such sizes) */
    for (int k = j->ndim - 1; k >= 0; k--) {
        int64_t n = shape[k] > 1 ? shape[k] : 1;
        j->shape[k] = shape[k];
        j->strides[k] = stride;
        stride = stride > SINPE_MAX_SPAN / n ? SINPE_MAX_SPAN : stride * n;
    }
    j->base = base;
}

static int check_opts(const sinpe_opts *o)
{
    if (!o)
        return SINPE_E_NULL;
    if (o->threads < 1 || o->threads > SINPE_MAX_THREADS)
        return SINPE_E_THREADS;
    if (vml_of(o->backend) >= 0)
        return sinpe_vml_loaded((sinpe_vml)vml_of(o->backend)) ? SINPE_OK : SINPE_E_BACKEND;
    if (o->backend == SINPE_BACKEND_SLEEF) {
        const sinpe_sleef *z = &o->sleef;
        int ok = (z->trig == SINPE_SLEEF_U10 || z->trig == SINPE_SLEEF_U35)
                 && (z->lanes == 4 || z->lanes == 8) && z->torch_threads >= 1;
        return ok ? SINPE_OK : SINPE_E_BACKEND;
    }
    if (o->backend != SINPE_BACKEND_BUILTIN)
        return SINPE_E_BACKEND;
    return sinpe_path_available(o->path) ? SINPE_OK : SINPE_E_PATH;
}

/* Number of elements of the row axes (all but the last), 0 if any is 0. */
static int64_t row_count(const sinpe_job *j)
{
    int64_t n = 1;
    for (int k = 0; k < j->ndim - 1; k++)
        n = j->shape[k] == 0 ? 0 : n * j->shape[k]; /* bounded: checked sizes */
    return n;
}

/* The rules of a preset table's description (sinpe_spec), given d columns. */
static int check_spec(const sinpe_job *j, int64_t d)
{
    const sinpe_spec *sp = j->spec;
    int64_t T = sp->nang;
    if (T < 1 || d < 1 || !sp->col || (!sp->freq) == (!sp->freq64))
        return SINPE_E_SPEC;
    if (sp->ncomp < 1 || sp->ncomp > 2 || (!j->use_pos && sp->ncomp != 1))
        return SINPE_E_SPEC;
    for (int64_t t = 0; sp->comp && t < T; t++)
        if (sp->comp[t] < 0 || sp->comp[t] >= sp->ncomp)
            return SINPE_E_SPEC;
    for (int64_t k = 0; k < d; k++)
        if (sp->col[k] < 0 || sp->col[k] / 4 >= T)
            return SINPE_E_SPEC;
    /* torch's tensor may leave out only a leading zero row (fairseq2's pad row) */
    if (sp->trow_shift != 0 && !(sp->trow_shift == -1 && j->use_pos && sp->zero_row == 0))
        return SINPE_E_SPEC;
    return SINPE_OK;
}

/* The positions' extent in bytes (with a preset's component axis). */
static int positions_extent(const sinpe_job *j, int64_t *lo, int64_t *hi)
{
    int n = j->ndim - 1;
    int64_t shape[SINPE_MAX_DIMS + 1], strides[SINPE_MAX_DIMS + 1];
    memcpy(shape, j->shape, (size_t)n * sizeof(int64_t));
    memcpy(strides, j->pos_strides, (size_t)n * sizeof(int64_t));
    if (j->spec && j->spec->ncomp > 1) {
        shape[n] = j->spec->ncomp;
        strides[n] = j->pos_comp_stride;
        n++;
    }
    return sinpe_extent(n, shape, strides, sinpe_type_size(j->pos_type), lo, hi);
}

int sinpe_job_check(const sinpe_job *j, const sinpe_opts *o)
{
    if (!j)
        return SINPE_E_NULL;
    if ((int)j->type < 0 || j->type > SINPE_BF16)
        return SINPE_E_TYPE;
    int nd = j->ndim;
    if (nd < (j->use_pos ? 1 : 2) || nd > SINPE_MAX_DIMS)
        return SINPE_E_DIMS;
    int64_t d = j->shape[nd - 1], w = sinpe_type_size(j->type);
    if (j->spec) {
        int st = check_spec(j, d);
        if (st != SINPE_OK)
            return st;
    } else if (d < 2 || d % 2 != 0) {
        return SINPE_E_DMODEL;
    }
    for (int k = 0; k < nd - 1; k++)
        if (j->shape[k] < 0)
            return SINPE_E_ROWS;
    if (!j->spec && (!isfinite(j->base) || !(j->base > 0.0)))
        return SINPE_E_BASE;
    /* a row must be addressable even in an empty table; then the whole */
    if (d > SINPE_MAX_SPAN / w)
        return SINPE_E_SIZE;
    int64_t bytes = d * w;
    for (int k = 0; k < nd - 1; k++) {
        if (j->shape[k] == 0) {
            bytes = 0;
            break;
        }
        if (j->shape[k] > SINPE_MAX_SPAN / bytes)
            return SINPE_E_SIZE;
        bytes *= j->shape[k];
    }
    if (!j->use_pos) {
        int64_t len = j->shape[nd - 2];
        if (j->offset < 0)
            return SINPE_E_OFFSET;
        if (len > 0 && j->offset > INT64_MAX - (len - 1))
            return SINPE_E_LASTPOS;
        if (j->table_rows != 0 && (j->table_rows < 0 || j->table_rows - len < j->offset))
            return SINPE_E_TABLE;
        if (j->table_rows > INT64_MAX / d)
            return SINPE_E_SIZE;
    } else {
        if ((int)j->pos_type < 0 || j->pos_type >= SINPE_TYPE_COUNT)
            return SINPE_E_TYPE;
        int64_t lo, hi;
        int st = positions_extent(j, &lo, &hi);
        if (st != SINPE_OK)
            return st;
    }
    int st = sinpe_overlap_check(nd, j->shape, j->strides, w);
    if (st != SINPE_OK)
        return st;
    return check_opts(o);
}

/* 1 when the positions' bytes and the destination's bytes intersect. */
static int positions_alias(const sinpe_job *j)
{
    if (!j->use_pos || !j->pos || !j->data)
        return 0;
    int64_t dlo, dhi, plo, phi;
    if (sinpe_extent(j->ndim, j->shape, j->strides, sinpe_type_size(j->type), &dlo, &dhi)
            != SINPE_OK
        || positions_extent(j, &plo, &phi) != SINPE_OK)
        return 1;
    if (dlo == dhi || plo == phi)
        return 0;
    uintptr_t d0 = (uintptr_t)j->data, p0 = (uintptr_t)j->pos;
    uintptr_t da = d0 + (uintptr_t)dlo, db = d0 + (uintptr_t)dhi;
    uintptr_t pa = p0 + (uintptr_t)plo, pb = p0 + (uintptr_t)phi;
    return pa < db && da < pb;
}

/* ---- plans ---------------------------------------------------------------------------- */

typedef struct {
    float *pe;   /* rows x 2*cols of table values (NULL when written directly) */
    float *posf; /* positions of a tile's rows (ncomp per row) */
    float *wa, *ws, *wc; /* presets: a tile's angles, sines, cosines */
    int64_t key; /* the tile rows in pe: row block * ncb + column block; -1 none */
} slot;

struct sinpe_plan {
    sinpe_job j;
    sinpe_opts o;
    const sinpe_path_ops *path;
    sinpe_emitter em;
    float c; /* (float)(-log(base) / d_model) */
    /* geometry; rowlen: values per row of a tile (2 J, or a preset's columns) */
    int64_t half, J, ncb, C, nrows, nrc, B, nb, nbt, ntiles, rowlen;
    const sinpe_spec *spec;
    sinpe_spec_prog prog; /* the spec compiled: angles computed per row, column runs */
    int ncomp;
    int direct;
    int64_t rstride; /* by offset: the rows' axis */
    int bn;          /* by offset: leading axes */
    int64_t bshape[SINPE_MAX_DIMS], bs[SINPE_MAX_DIMS];
    int rn; /* by positions: the row axes, destination and position strides */
    int64_t rshape[SINPE_MAX_DIMS], rs[SINPE_MAX_DIMS], ps[SINPE_MAX_DIMS];
    const char *pos;
    sinpe_type pos_type;
    float *poscopy; /* positions copied first (they share memory with the destination) */
    int64_t npos;   /* rows of poscopy; 0: positions read in place */
    /* the SLEEF backend's vectors: torch's table of tn elements, its thread chunks */
    int64_t tn, tchunk;
    /* scratch */
    float *div, *dmin, *dmax;
    int nslots;
    slot slots[SINPE_MAX_THREADS];
    void *mem;
    /* progress */
    int stage;
    int64_t next;
};

static int64_t ceil_div64(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

static int aligned_f32(const sinpe_job *j)
{
    if ((uintptr_t)j->data % 4)
        return 0;
    for (int k = 0; k < j->ndim; k++)
        if (j->shape[k] > 1 && j->strides[k] % 4)
            return 0;
    return 1;
}

/* torch's at::parallel_for(0, n, 2048, ...) with OpenMP: min(threads, ceil(n / 2048))
 * threads, thread t taking [t c, (t+1) c) with c = ceil(n / that count); one chunk when
 * n <= 2048 or one thread (aten/src/ATen/ParallelOpenMP.h; grain 2048 of the sin/cos/exp
 * kernels: aten/src/ATen/native/cpu/UnaryOpsKernel.cpp). */
static int64_t sleef_chunk(int64_t n, int threads)
{
    if (n <= 2048 || threads <= 1)
        return n > 0 ? n : 1;
    int64_t t = ceil_div64(n, 2048) < threads ? ceil_div64(n, 2048) : threads;
    return ceil_div64(n, t);
}

static void geometry(sinpe_plan *p)
{
    const sinpe_job *j = &p->j;
    int nd = j->ndim;
    int64_t d = j->shape[nd - 1];
    p->spec = j->spec;
    p->ncomp = j->spec ? j->spec->ncomp : 1;
    if (j->spec) { /* one column block; rows per tile from the wider of angles and columns */
        p->half = p->J = j->spec->nang;
        p->ncb = 1;
        p->rowlen = d;
        int64_t wide = d > p->J ? d : p->J;
        p->C = 2 * SINPE_TILE_PAIRS / wide > 0 ? 2 * SINPE_TILE_PAIRS / wide : 1;
    } else {
        p->half = d / 2;
        p->J = p->half < SINPE_TILE_PAIRS ? p->half : SINPE_TILE_PAIRS;
        p->ncb = ceil_div64(p->half, p->J);
        p->rowlen = 2 * p->J;
        p->C = SINPE_TILE_PAIRS / p->J;
        if (j->add && !j->use_pos) /* longer runs of x per batch for the prefetcher */
            p->C = SINPE_ADD_VALUES / p->rowlen > 0 ? SINPE_ADD_VALUES / p->rowlen : 1;
    }
    p->em.type = j->type;
    p->em.add = j->add;
    p->em.cstride = j->strides[nd - 1];
    p->em.path = p->path;
    p->em.fast = j->type == SINPE_F32 && p->em.cstride == 4 && aligned_f32(j);
    if (!j->use_pos) {
        p->nrows = j->shape[nd - 2];
        p->rstride = j->strides[nd - 2];
        p->bn = nd - 2;
        p->B = 1;
        for (int k = 0; k < p->bn; k++) {
            p->bshape[k] = j->shape[k];
            p->bs[k] = j->strides[k];
            p->B *= j->shape[k]; /* bounded: checked sizes (0 stays 0) */
        }
        if (p->B > 0)
            p->bn = sinpe_collapse(p->bn, p->bshape, p->bs, NULL);
        p->direct = !j->add && p->em.fast && p->B == 1;
    } else {
        p->rn = nd - 1;
        p->nrows = row_count(j);
        int64_t contiguous = 4;
        for (int k = p->rn - 1; k >= 0; k--) {
            p->rshape[k] = j->shape[k];
            p->rs[k] = j->strides[k];
            p->ps[k] = p->npos ? contiguous : j->pos_strides[k];
            contiguous *= j->shape[k] > 0 ? j->shape[k] : 1;
        }
        if (p->nrows > 0)
            p->rn = sinpe_collapse(p->rn, p->rshape, p->rs, p->ps);
        p->B = 1;
        p->direct = !j->add && p->em.fast && p->rn <= 1;
        if (p->rn == 0) { /* a single row */
            p->rn = 1;
            p->rshape[0] = 1;
            p->rs[0] = p->ps[0] = 0;
        }
        p->rstride = p->rs[p->rn - 1];
    }
    if (p->C > p->nrows)
        p->C = p->nrows > 0 ? p->nrows : 1;
    p->nrc = ceil_div64(p->nrows, p->C);
    int64_t per = p->C * p->rowlen;
    p->nb = SINPE_TILE_VALUES / per > 0 ? SINPE_TILE_VALUES / per : 1;
    if (p->nb > p->B)
        p->nb = p->B > 0 ? p->B : 1;
    p->nbt = ceil_div64(p->B, p->nb);
    p->ntiles = p->nrows && p->B ? p->nrc * p->ncb * p->nbt : 0;
    if (p->o.backend == SINPE_BACKEND_SLEEF) {
        int64_t rows = j->use_pos ? p->nrows
                       : j->table_rows ? j->table_rows : j->offset + p->nrows;
        if (j->spec)
            rows += j->spec->trow_shift;
        p->tn = rows * p->half;
        p->tchunk = sleef_chunk(p->tn, p->o.sleef.torch_threads);
    }
}

static int64_t total_values(const sinpe_job *j)
{
    int64_t n = j->shape[j->ndim - 1] * row_count(j);
    return n;
}

/* Work of one tile (sinpe_plan_step's units): its table values, computed
 * once per run of tiles with the same rows, and the values it stores. */
static int64_t tile_work(const sinpe_plan *p)
{
    int64_t per = p->C * (p->rowlen > p->J ? p->rowlen : p->J);
    if (p->direct)
        return per;
    int64_t w = per / p->nbt + per * p->nb / SINPE_STORE_SHARE;
    return w > 0 ? w : 1;
}

static int threads_for(const sinpe_plan *p)
{
    if (p->ntiles == 0)
        return 1;
    int64_t work = p->ntiles * tile_work(p) / SINPE_MIN_THREAD_WORK;
    int t = p->o.threads;
    return work < 1 ? 1 : work < t ? (int)work : t;
}

/* The scratch of a plan, in floats: divisors and their column blocks'
 * ranges, per-slot rows and positions, copied positions. */
/* The first float at or after m whose address is congruent to data's modulo 64 bytes
 * (data's modulo 4 is ignored: unaligned float32 outputs take the slow emitters). */
static float *align_like(float *m, const void *data)
{
    uintptr_t want = ((uintptr_t)data / 4) % SINPE_ALIGN_FLOATS;
    uintptr_t have = ((uintptr_t)m / 4) % SINPE_ALIGN_FLOATS;
    return m + (want + SINPE_ALIGN_FLOATS - have) % SINPE_ALIGN_FLOATS;
}

static int64_t scratch_floats(const sinpe_plan *p)
{
    if (p->ntiles == 0 || p->nslots == 0)
        return 0;
    int64_t per_slot = p->C * p->ncomp + (p->direct ? 0 : p->C * p->rowlen + SINPE_ALIGN_FLOATS)
                       + (p->spec ? 3 * p->C * p->J : 0);
    return p->half + 2 * p->ncb + (int64_t)p->nslots * per_slot + p->npos * p->ncomp;
}

int64_t sinpe_job_scratch_bytes(const sinpe_job *j, const sinpe_opts *o)
{
    if (sinpe_job_check(j, o) != SINPE_OK)
        return 0;
    sinpe_plan *p = calloc(1, sizeof *p);
    if (!p)
        return 0;
    p->j = *j;
    p->o = *o;
    p->path = &sinpe_path_scalar;
    p->npos = positions_alias(j) ? row_count(j) : 0;
    geometry(p);
    p->nslots = threads_for(p);
    int64_t f = scratch_floats(p);
    free(p);
    return f * (int64_t)sizeof(float) + (int64_t)sizeof(sinpe_plan);
}

int sinpe_plan_new(const sinpe_job *j, const sinpe_opts *o, sinpe_plan **out)
{
    if (!out)
        return SINPE_E_NULL;
    *out = NULL;
    int st = sinpe_job_check(j, o);
    if (st != SINPE_OK)
        return st;
    int64_t values = total_values(j);
    if (values > 0 && (!j->data || (j->use_pos && !j->pos)))
        return SINPE_E_NULL;
    sinpe_plan *p = calloc(1, sizeof *p);
    if (!p)
        return SINPE_E_NOMEM;
    p->j = *j;
    p->o = *o;
    p->path = sinpe_path_ops_get(o->backend == SINPE_BACKEND_BUILTIN ? o->path : sinpe_path_best());
    p->c = (float)(-log(j->base) / (double)j->shape[j->ndim - 1]);
    p->pos = j->pos;
    p->pos_type = j->pos_type;
    p->npos = positions_alias(j) ? row_count(j) : 0;
    geometry(p);
    p->nslots = threads_for(p);
    if (j->spec && sinpe_spec_compile(j->spec, j->shape[j->ndim - 1],
                                      o->backend != SINPE_BACKEND_SLEEF, &p->prog) != SINPE_OK) {
        free(p);
        return SINPE_E_NOMEM;
    }
    int64_t nf = scratch_floats(p);
    if (nf > 0) {
        if ((uint64_t)nf > SIZE_MAX / sizeof(float) || !(p->mem = malloc((size_t)nf * sizeof(float)))) {
            sinpe_spec_prog_free(&p->prog);
            free(p);
            return SINPE_E_NOMEM;
        }
        float *m = p->mem;
        p->div = m;
        m += p->half;
        p->dmin = m;
        m += p->ncb;
        p->dmax = m;
        m += p->ncb;
        for (int t = 0; t < p->nslots; t++) {
            p->slots[t].posf = m;
            m += p->C * p->ncomp;
            if (!p->direct) {
                p->slots[t].pe = align_like(m, p->j.data);
                m += p->C * p->rowlen + SINPE_ALIGN_FLOATS;
            }
            if (p->spec) {
                p->slots[t].wa = m;
                p->slots[t].ws = m + p->C * p->J;
                p->slots[t].wc = m + 2 * p->C * p->J;
                m += 3 * p->C * p->J;
            }
            p->slots[t].key = -1;
        }
        p->poscopy = p->npos ? m : NULL;
    }
    *out = p;
    return SINPE_OK;
}

void sinpe_plan_free(sinpe_plan *p)
{
    if (p) {
        sinpe_spec_prog_free(&p->prog);
        free(p->mem);
        free(p);
    }
}

/* Component q of the position of row r (flat index over the row axes) at byte offset off. */
static float position_at(const sinpe_plan *p, int64_t r, int64_t off, int q)
{
    if (p->npos)
        return p->poscopy[r * p->ncomp + q];
    return sinpe_load_position(p->pos + off + q * p->j.pos_comp_stride, p->pos_type);
}

/* Component q of the position of row `row` of the table (a flat row index over the job's
 * row axes when by positions). */
static float table_position(const sinpe_plan *p, int64_t row, int q)
{
    if (!p->j.use_pos)
        return (float)row;
    if (p->npos)
        return p->poscopy[row * p->ncomp + q];
    sinpe_walker w;
    sinpe_walker_init(&w, p->rn, p->rshape, p->rs, p->ps, row);
    return sinpe_load_position(p->pos + w.o2 + q * p->j.pos_comp_stride, p->pos_type);
}

/* The angle of element f of torch's angle tensor (rows of half, or of a preset's T). */
static float angle_at(const sinpe_plan *p, int64_t f)
{
    int64_t row = f / p->half, t = f % p->half;
    const sinpe_spec *sp = p->spec;
    if (!sp)
        return table_position(p, row, 0) * p->div[t];
    float v = table_position(p, row - sp->trow_shift, sp->comp ? sp->comp[t] : 0) * sp->freq[t];
    return sp->scaled ? sp->scale * v : v;
}

/* The path of torch's vector around element e0 + i0 .. (table elements), given the angles
 * a[0 .. n) of elements e0 .. e0+n-1: the largest path any element of the vector needs;
 * elements outside a[] are recomputed from their row's position. Sets [*gs, *ge). */
static int sleef_group_path(const sinpe_plan *p, int64_t e, int64_t e0, const float *a, int64_t n,
                            int64_t *gs, int64_t *ge)
{
    int64_t lanes = p->o.sleef.lanes, c0 = e / p->tchunk * p->tchunk;
    int64_t cend = c0 + p->tchunk < p->tn ? c0 + p->tchunk : p->tn; /* padding lanes are 0 */
    *gs = c0 + (e - c0) / lanes * lanes;
    *ge = *gs + lanes < cend ? *gs + lanes : cend;
    int path = 0;
    for (int64_t f = *gs; f < *ge; f++) {
        float ang = f >= e0 && f < e0 + n ? a[f - e0] : angle_at(p, f);
        int q = sinpe_sleef_path(p->o.sleef.trig, ang);
        path = q > path ? q : path;
    }
    return path;
}

/* sin and cos of n angles a[] that are elements e0 .. e0+n-1 of torch's tensor, as
 * torch-on-aarch64's SLEEF evaluates them (each vector on its largest element's path). */
static void sleef_sincos_run(const sinpe_plan *p, int64_t e0, const float *a, float *s, float *c,
                             int64_t n)
{
    for (int64_t i = 0; i < n;) {
        int64_t gs, ge;
        int path = sleef_group_path(p, e0 + i, e0, a, n, &gs, &ge);
        int64_t end = ge - e0 < n ? ge - e0 : n;
        sinpe_sleef_sincos(p->o.sleef.trig, path, a + i, s + i, c + i, (size_t)(end - i));
        i = end;
    }
}

/* Table rows with torch-on-aarch64's SLEEF: each vector of torch's evaluated on the path
 * its largest element needs.  table_row0: the table row of the first row here. */
static void sleef_rows(const sinpe_plan *p, float *out, ptrdiff_t ostride, const float *pos,
                       int64_t table_row0, int64_t nrows, int64_t j0, int64_t nj)
{
    float a[SINPE_BLOCK], s[SINPE_BLOCK], c[SINPE_BLOCK];
    for (int64_t r = 0; r < nrows; r++) {
        int64_t row = table_row0 + r;
        float position = pos ? pos[r] : (float)row;
        float *dst = out + (ptrdiff_t)r * ostride;
        for (int64_t b0 = 0; b0 < nj; b0 += SINPE_BLOCK) {
            int64_t n = nj - b0 < SINPE_BLOCK ? nj - b0 : SINPE_BLOCK;
            int64_t e0 = row * p->half + j0 + b0;
            for (int64_t i = 0; i < n; i++)
                a[i] = position * p->div[j0 + b0 + i];
            sleef_sincos_run(p, e0, a, s, c, n);
            p->path->interleave(s, c, dst + 2 * b0, (size_t)n);
        }
    }
}

/* A preset's float32 angles of nr rows (row r at position pos[r * ncomp + q], or
 * (float)(first + r) by offset). */
static void spec_angles(const sinpe_plan *p, const float *pos, int64_t first, int64_t nr,
                        float *a)
{
    const sinpe_spec *sp = p->spec;
    const sinpe_spec_prog *pr = &p->prog;
    int64_t T = pr->K;
    for (int64_t r = 0; r < nr; r++) {
        float p0 = pos ? pos[r * p->ncomp] : (float)(first + r);
        float p1 = pos && p->ncomp > 1 ? pos[r * p->ncomp + 1] : 0.0f;
        float *ar = a + r * T;
        for (int64_t t = 0; t < T; t++) {
            float v = (pr->comp && pr->comp[t] ? p1 : p0) * pr->freq[t];
            ar[t] = sp->scaled ? sp->scale * v : v;
        }
    }
}

/* A preset's float64 angles of nr rows, their sines and cosines (the C library's),
 * each rounded to float32. */
static void spec_f64(const sinpe_plan *p, const float *pos, int64_t first, int64_t nr, float *a,
                     float *s, float *c)
{
    const sinpe_spec *sp = p->spec;
    const sinpe_spec_prog *pr = &p->prog;
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

/* Rows of a preset table (sinpe_spec): angles, their sin and cos on the backend, then
 * each column picked from them. */
static void spec_rows(const sinpe_plan *p, slot *sl, float *out, ptrdiff_t ostride,
                      const float *pos, int64_t first, int64_t table_row0, int64_t nr)
{
    const sinpe_spec *sp = p->spec;
    const sinpe_spec_prog *pr = &p->prog;
    int64_t T = pr->K, n = nr * T;
    float *a = sl->wa, *s = sl->ws, *c = sl->wc;
    int any = pr->need_s || pr->need_c;
    if (sp->freq64) {
        spec_f64(p, pos, first, nr, a, s, c);
    } else {
        spec_angles(p, pos, first, nr, a);
        if (!any) {
            /* angles only */
        } else if (vml_of(p->o.backend) >= 0) {
            sinpe_vml lib = (sinpe_vml)vml_of(p->o.backend);
            for (int64_t i = 0; i < n; i += SINPE_BLOCK) {
                size_t m = (size_t)(n - i < SINPE_BLOCK ? n - i : SINPE_BLOCK);
                if (pr->need_s)
                    sinpe_vml_map(lib, 1, a + i, s + i, m);
                if (pr->need_c)
                    sinpe_vml_map(lib, 2, a + i, c + i, m);
            }
        } else if (p->o.backend == SINPE_BACKEND_SLEEF) {
            int64_t skip = table_row0 + sp->trow_shift < 0 ? T : 0; /* the pad row: zeros */
            sleef_sincos_run(p, (table_row0 + sp->trow_shift) * T + skip, a + skip, s + skip,
                             c + skip, n - skip);
        } else {
            for (int64_t i = 0; i < n; i += SINPE_BLOCK)
                p->path->sincos(a + i, s + i, c + i,
                                (size_t)(n - i < SINPE_BLOCK ? n - i : SINPE_BLOCK));
        }
    }
    for (int64_t r = 0; r < nr; r++) {
        float *dst = out + (ptrdiff_t)r * ostride;
        if (table_row0 + r == sp->zero_row)
            memset(dst, 0, (size_t)p->rowlen * sizeof(float));
        else
            sinpe_spec_gather(pr, p->path, dst, a + r * T, s + r * T, c + r * T);
    }
}

static void rows_out(const sinpe_plan *p, slot *sl, float *out, ptrdiff_t ostride,
                     const float *pos, int64_t first_row, int64_t table_row0, int64_t nrows,
                     int64_t cb)
{
    if (p->spec) {
        spec_rows(p, sl, out, ostride, pos, first_row, table_row0, nrows);
        return;
    }
    int64_t j0 = cb * p->J, nj = p->half - j0 < p->J ? p->half - j0 : p->J;
    const float *div = p->div + j0;
    if (vml_of(p->o.backend) >= 0)
        vml_rows((sinpe_vml)vml_of(p->o.backend), p->path, out, ostride, pos, first_row, nrows,
                 div, nj);
    else if (p->o.backend == SINPE_BACKEND_SLEEF)
        sleef_rows(p, out, ostride, pos, table_row0, nrows, j0, nj);
    else
        p->path->rows(out, ostride, pos, first_row, nrows, div, nj, p->dmin[cb], p->dmax[cb]);
}

static void run_tile(sinpe_plan *p, slot *sl, int64_t t)
{
    int64_t per_rc = p->ncb * p->nbt;
    int64_t rc = t / per_rc, cb = (t % per_rc) / p->nbt, bb = t % p->nbt;
    int64_t r0 = rc * p->C, nr = p->nrows - r0 < p->C ? p->nrows - r0 : p->C;
    int64_t j0 = cb * p->J, nj = p->half - j0 < p->J ? p->half - j0 : p->J;
    int64_t rl = p->spec ? p->rowlen : 2 * nj; /* values per row of this tile */
    char *base = (char *)p->j.data + 2 * j0 * p->em.cstride;
    if (!p->j.use_pos) {
        int64_t first = p->j.offset + r0;
        if (p->direct) {
            rows_out(p, sl, (float *)(void *)(base + r0 * p->rstride), p->rstride / 4, NULL,
                     first, first, nr, cb);
            return;
        }
        int64_t key = rc * p->ncb + cb;
        if (sl->key != key) {
            rows_out(p, sl, sl->pe, rl, NULL, first, first, nr, cb);
            sl->key = key;
        }
        int64_t b0 = bb * p->nb, nbk = p->B - b0 < p->nb ? p->B - b0 : p->nb;
        sinpe_walker w;
        sinpe_walker_init(&w, p->bn, p->bshape, p->bs, NULL, b0);
        for (int64_t b = 0; b < nbk; b++, sinpe_walker_next(&w)) {
            char *x = base + w.o1 + r0 * p->rstride;
            for (int64_t r = 0; r < nr; r++)
                sinpe_emit(&p->em, x + r * p->rstride, sl->pe + r * rl, rl);
        }
        return;
    }
    sinpe_walker w;
    sinpe_walker_init(&w, p->rn, p->rshape, p->rs, p->ps, r0);
    char *first = base + w.o1;
    for (int64_t r = 0; r < nr; r++, sinpe_walker_next(&w))
        for (int q = 0; q < p->ncomp; q++)
            sl->posf[r * p->ncomp + q] = position_at(p, r0 + r, w.o2, q);
    if (p->direct) {
        rows_out(p, sl, (float *)(void *)first, p->rstride / 4, sl->posf, 0, r0, nr, cb);
        return;
    }
    rows_out(p, sl, sl->pe, rl, sl->posf, 0, r0, nr, cb);
    sinpe_walker_init(&w, p->rn, p->rshape, p->rs, p->ps, r0);
    for (int64_t r = 0; r < nr; r++, sinpe_walker_next(&w))
        sinpe_emit(&p->em, base + w.o1, sl->pe + r * rl, rl);
    sl->key = -1;
}

static void run_divisors(sinpe_plan *p, int64_t cb)
{
    int64_t j0 = cb * p->J, nj = p->half - j0 < p->J ? p->half - j0 : p->J;
    float arg[SINPE_BLOCK];
    for (int64_t i0 = 0; i0 < nj; i0 += SINPE_BLOCK) {
        size_t n = (size_t)(nj - i0 < SINPE_BLOCK ? nj - i0 : SINPE_BLOCK);
        for (size_t i = 0; i < n; i++)
            arg[i] = (float)(2 * (j0 + i0 + (int64_t)i)) * p->c;
        exp_block(p->o.backend, arg, p->div + j0 + i0, n);
    }
    float lo = INFINITY, hi = 0.0f;
    for (int64_t i = j0; i < j0 + nj; i++) {
        lo = p->div[i] < lo ? p->div[i] : lo;
        hi = p->div[i] > hi ? p->div[i] : hi;
    }
    p->dmin[cb] = lo;
    p->dmax[cb] = hi;
}

static void run_poscopy(sinpe_plan *p, int64_t item)
{
    int64_t r0 = item * SINPE_POS_BLOCK, n = p->npos - r0 < SINPE_POS_BLOCK ? p->npos - r0 : SINPE_POS_BLOCK;
    sinpe_walker w;
    sinpe_walker_init(&w, p->j.ndim - 1, p->j.shape, p->j.pos_strides, NULL, r0);
    for (int64_t r = 0; r < n; r++, sinpe_walker_next(&w))
        for (int q = 0; q < p->ncomp; q++)
            p->poscopy[(r0 + r) * p->ncomp + q] =
                sinpe_load_position(p->pos + w.o1 + q * p->j.pos_comp_stride, p->pos_type);
}

enum { STAGE_POSCOPY, STAGE_DIVISORS, STAGE_TILES, STAGE_DONE };

static int64_t stage_items(const sinpe_plan *p, int stage)
{
    if (p->ntiles == 0)
        return 0;
    switch (stage) {
    case STAGE_POSCOPY: return p->npos ? ceil_div64(p->npos, SINPE_POS_BLOCK) : 0;
    case STAGE_DIVISORS: return p->spec ? 0 : p->ncb;
    case STAGE_TILES: return p->ntiles;
    default: return 0;
    }
}

/* Work per item, about (for budgets and thread counts). */
static int64_t item_work(const sinpe_plan *p, int stage)
{
    switch (stage) {
    case STAGE_POSCOPY: return SINPE_POS_BLOCK / SINPE_STORE_SHARE;
    case STAGE_DIVISORS: return p->J;
    default: return tile_work(p);
    }
}

typedef struct {
    sinpe_plan *p;
    int stage;
    int64_t first;
} step_ctx;

static void step_task(void *ctx, int64_t begin, int64_t end, int tid)
{
    step_ctx *s = ctx;
    for (int64_t i = s->first + begin; i < s->first + end; i++) {
        if (s->stage == STAGE_POSCOPY)
            run_poscopy(s->p, i);
        else if (s->stage == STAGE_DIVISORS)
            run_divisors(s->p, i);
        else
            run_tile(s->p, &s->p->slots[tid], i);
    }
}

int sinpe_plan_step(sinpe_plan *p, int64_t budget, int *done)
{
    if (!p || !done)
        return SINPE_E_NULL;
    while (p->stage < STAGE_DONE && p->next >= stage_items(p, p->stage)) {
        p->stage++;
        p->next = 0;
    }
    if (p->stage < STAGE_DONE) {
        int64_t n = stage_items(p, p->stage), per = item_work(p, p->stage);
        int64_t k = budget / per > 0 ? budget / per : 1;
        if (k > n - p->next)
            k = n - p->next;
        int64_t min_items = SINPE_MIN_THREAD_WORK / per > 0 ? SINPE_MIN_THREAD_WORK / per : 1;
        step_ctx s = { p, p->stage, p->next };
        sinpe_parallel_for(k, min_items, p->nslots, step_task, &s);
        p->next += k;
        while (p->stage < STAGE_DONE && p->next >= stage_items(p, p->stage)) {
            p->stage++;
            p->next = 0;
        }
    }
    *done = p->stage == STAGE_DONE;
    return SINPE_OK;
}

int sinpe_run(const sinpe_job *j, const sinpe_opts *o)
{
    sinpe_plan *p;
    int st = sinpe_plan_new(j, o, &p);
    if (st != SINPE_OK)
        return st;
    int done = 0;
    while (st == SINPE_OK && !done)
        st = sinpe_plan_step(p, INT64_MAX, &done);
    sinpe_plan_free(p);
    return st;
}

/* ---- conveniences --------------------------------------------------------------------- */

int sinpe_table(float *out, int64_t max_len, int64_t d_model, double base, const sinpe_opts *o)
{
    sinpe_job j;
    int64_t shape[2] = { max_len, d_model };
    sinpe_job_init(&j, out, 2, shape, base);
    return sinpe_run(&j, o);
}

int sinpe_add(float *x, int64_t nbatch, int64_t len, int64_t d_model, ptrdiff_t batch_stride,
              ptrdiff_t row_stride, int64_t offset, double base, const sinpe_opts *o)
{
    sinpe_job j;
    int64_t shape[3] = { nbatch, len, d_model };
    sinpe_job_init(&j, x, 3, shape, base);
    j.strides[0] = (int64_t)batch_stride * 4;
    j.strides[1] = (int64_t)row_stride * 4;
    j.add = 1;
    j.offset = offset;
    return sinpe_run(&j, o);
}

/* torch.sin / cos / exp of an n-element float32 tensor on aarch64 (one call, chunked over
 * torch's threads as for tables). */
static int sleef_map(int func, const float *in, float *out, size_t n, const sinpe_sleef *z)
{
    if (func == 0) {
        exp_block(SINPE_BACKEND_SLEEF, in, out, n);
        return SINPE_OK;
    }
    int64_t chunk = sleef_chunk((int64_t)n, z->torch_threads);
    float other[8];
    for (int64_t g = 0; g < (int64_t)n;) {
        int64_t c0 = g / chunk * chunk, cend = c0 + chunk < (int64_t)n ? c0 + chunk : (int64_t)n;
        int64_t ge = c0 + ((g - c0) / z->lanes + 1) * z->lanes;
        ge = ge < cend ? ge : cend;
        int path = 0;
        for (int64_t f = g; f < ge; f++) {
            int q = sinpe_sleef_path(z->trig, in[f]);
            path = q > path ? q : path;
        }
        float *s = func == 1 ? out + g : other, *c = func == 2 ? out + g : other;
        sinpe_sleef_sincos(z->trig, path, in + g, s, c, (size_t)(ge - g));
        g = ge;
    }
    return SINPE_OK;
}

int sinpe_map(int func, const float *in, float *out, size_t n, const sinpe_opts *o)
{
    int st = check_opts(o);
    if (st != SINPE_OK)
        return st;
    if (func < 0 || func > 2)
        return SINPE_E_FUNC;
    if (n && (!in || !out))
        return SINPE_E_NULL;
    if (vml_of(o->backend) >= 0)
        return sinpe_vml_map((sinpe_vml)vml_of(o->backend), func, in, out, n);
    if (o->backend == SINPE_BACKEND_SLEEF)
        return sleef_map(func, in, out, n, &o->sleef);
    if (func == 0) {
        exp_block(SINPE_BACKEND_BUILTIN, in, out, n);
        return SINPE_OK;
    }
    /* sin or cos through the path's block sin/cos, so that tests of this
     * function exercise the path the tables use */
    const sinpe_path_ops *path = sinpe_path_ops_get(o->path);
    float other[SINPE_BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += SINPE_BLOCK) {
        size_t m = n - i0 < SINPE_BLOCK ? n - i0 : SINPE_BLOCK;
        float *s = func == 1 ? out + i0 : other, *c = func == 2 ? out + i0 : other;
        path->sincos(in + i0, s, c, m);
    }
    return SINPE_OK;
}

int64_t sinpe_physical_memory(void)
{
#if defined(_WIN32)
    MEMORYSTATUSEX m;
    m.dwLength = sizeof m;
    return GlobalMemoryStatusEx(&m) ? (int64_t)m.ullTotalPhys : 0;
#elif defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (int64_t)pages * (int64_t)size : 0;
#else
    return 0;
#endif
}
