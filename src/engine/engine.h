/* The engine's own declarations (engine layer, pure C): the plan every job kind runs as,
 * and the functions its files share.  Each job kind lives in one file, which calls only the
 * files below it (no file of src/ calls one that calls it back):
 *
 *   engine/api.c     the registries' public face and the conveniences for C callers
 *   engine/plan.c    plans: stages of items run in steps over threads      (every kind)
 *   engine/job.c     the one check of every job, options, memory           (every kind)
 *   engine/kinds.c   the job kinds, one row of functions each: plan.c and job.c dispatch on it
 *   engine/table.c   TABLE and ADD: rules, fresh shape, geometry, scratch, stages
 *   engine/rope.c    ROPE;  engine/map.c  MAP;  engine/freqs.c  FREQS
 *   engine/rows.c    a table's positions and rows (table.c's)
 *   engine/rules.c   the rules every kind's check shares (destination, bytes, C order, base)
 *   engine/layout.c, store.c, preset.c: strided layouts, element types, preset programs
 */
#ifndef SINPE_ENGINE_ENGINE_H
#define SINPE_ENGINE_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "backends/backend.h"
#include "engine/preset.h"
#include "engine/store.h"
#include "paths/path.h"
#include "sinpe.h"

/* Columns per tile (pairs): 4096 pairs = 8192 floats = 32 KiB of scratch. */
#define SINPE_TILE_PAIRS 4096
/* Values per tile, about, counting the leading-axes block. */
#define SINPE_TILE_VALUES 65536
/* Values of PE rows per tile when adding to a batch: 512 KiB, inside a core's L2 (1 MiB on
 * Zen 4/5 and recent Xeons), so that each batch is streamed in long contiguous runs
 * (measured on Zen 5: 32 KiB runs with jumps between batches cost 5.1 ms for 128 MiB against
 * 4.0 ms for 512 KiB runs; docs/speed.md). */
#define SINPE_ADD_VALUES 131072
/* Floats of slack per slot, to give each PE scratch the output's offset modulo 64 bytes
 * (then the add kernels, which align their stores, load PE aligned). */
#define SINPE_ALIGN_FLOATS 16
/* Work is counted in units of about one value computed (storing or adding a value costs
 * about 1/8 of one); a thread gets at least this much, so that small calls stay on the
 * calling thread (starting a thread costs about as much as 20000 values). */
#define SINPE_MIN_THREAD_WORK 65536
#define SINPE_STORE_SHARE 8
/* Adding kept rows (memory speed, no computing) costs about 1/24 of a computed value: a
 * second thread pays from about 1.6 million values (6 MiB of float32 x) on; below that the
 * start-up costs more than it saves (Zen 5, 2 threads: 64 x 64 x 256 took 113 us against 85
 * on one thread, 1 x 2048 x 1024 227 against 189; 64 x 128 x 768 698 against 879). */
#define SINPE_KEPT_SHARE 24
/* A value rotated by apply_rope, likewise (engine/rope.c): since the rows of a run go to the
 * path in one call (issue 38) a second thread pays from about 1 million values (Zen 4, 2
 * threads, median of 40: 1 x 512 x 32 x 128 float32 310 -> 200 us, float16 563 -> 374;
 * at 524 k values, 1 x 128 x 32 x 128, it gained nothing). */
#define SINPE_ROPE_SHARE 8
/* ... from this many values on an adopted OpenMP runtime (engine/rope.c) */
#define SINPE_ROPE_OPENMP_VALUES (2 * SINPE_MIN_THREAD_WORK)
/* Rows per position-copy item; arguments per backend call; vectors per rope item. */
#define SINPE_POS_BLOCK 16384
#define SINPE_BLOCK 2048
#define SINPE_ROPE_BLOCK 256

/* A thread's scratch. */
typedef struct {
    float *pe;           /* tile_rows x rowlen table values (NULL when written directly) */
    float *posf;         /* positions of a tile's rows (ncomp per row) */
    float *wa, *ws, *wc; /* presets: a tile's angles, sines, cosines */
    int64_t key;         /* the tile rows in pe: row block * col_blocks + column block; -1 */
} sinpe_slot;

/* A stage: items that threads share, run in order of their index. */
typedef struct sinpe_stage {
    int64_t (*items)(const struct sinpe_plan *p);
    int64_t (*work)(const struct sinpe_plan *p); /* per item, in units */
    void (*run)(struct sinpe_plan *p, int64_t item, int tid);
} sinpe_stage;

struct sinpe_plan {
    sinpe_job j; /* a copy: the arrays it points to stay the caller's */
    sinpe_opts o;
    const sinpe_backend_ops *be;
    const sinpe_path_ops *path;
    sinpe_bctx ctx; /* the backend's narrow view: path, profile, torch's tensor */
    const sinpe_stage *stages;
    int nstages;
    /* ---- tables and adds ---- */
    sinpe_emitter em;
    float c;                /* (float)(-log(base) / d_model) */
    int64_t pairs;          /* sin/cos pairs per row (d_model / 2), or a preset's angles */
    int64_t tile_pairs;     /* pairs per column block (all of a preset's angles) */
    int64_t col_blocks;
    int64_t rowlen;         /* values per tile row: 2 * tile_pairs, or a preset's columns */
    int64_t rows;           /* table rows (flat over the row axes by positions) */
    int64_t tile_rows;      /* rows per tile */
    int64_t fill_rows;      /* rows per item of the fill stage (kept rows) */
    int64_t row_blocks;
    int64_t batch;          /* by offset: elements of the leading axes */
    int64_t tile_batch;     /* of them per tile */
    int64_t batch_blocks;
    int64_t tiles;
    const sinpe_preset *preset;
    sinpe_preset_prog prog; /* the preset compiled: angles computed per row, column runs */
    int ncomp;              /* components per position (2: a preset's 2-d positions) */
    int direct;             /* rows are written straight into a float32 destination */
    int64_t row_stride;     /* the rows' axis (by offset), or the last row axis */
    int lead_n;             /* by offset: leading axes, merged */
    int64_t lead_shape[SINPE_MAX_DIMS], lead_strides[SINPE_MAX_DIMS];
    int row_n;              /* by positions: the row axes, destination and position strides */
    int64_t row_shape[SINPE_MAX_DIMS], row_dst[SINPE_MAX_DIMS], row_pos[SINPE_MAX_DIMS];
    const char *pos;
    int64_t comp_stride;    /* bytes between a position's components */
    float *poscopy;         /* positions copied first (they share memory with dst) */
    int64_t npos;           /* rows of poscopy; 0: positions read in place */
    float *div, *dmin, *dmax;
    int nslots;
    sinpe_slot *slots; /* nslots of them, at the start of mem */
    void *mem;
    /* ---- other kinds: elements (map, freqs) or vectors (rope) ---- */
    int64_t count;
    /* progress */
    int stage;
    int64_t next;
};

/* The job kinds (engine/kinds.c): what each one checks, how a fresh result of it is shaped,
 * how its plan is laid out, sized and allocated, and its stages; one row per sinpe_job_kind.
 * job.c and plan.c reach a kind's code through its row only. */
typedef struct {
    int own_axes;                       /* the kind checks its axes' lengths itself (tables:
                                           d_model first); else job.c does, before check */
    int (*check)(const sinpe_job *j);   /* the kind's own rules */
    int (*kept)(const sinpe_job *j, const sinpe_backend_ops *be); /* kept rows' rules; NULL:
                                           the kind takes none */
    int (*fresh)(sinpe_job *j);         /* a fresh result's shape; NULL: in place only */
    void (*complete)(sinpe_job *j);     /* the rest of a complete job, before the check; NULL */
    void (*layout)(sinpe_plan *p);      /* the plan of a checked job, nothing allocated */
    int64_t (*scratch)(const sinpe_plan *p); /* floats of scratch of a laid-out plan; NULL: none
                                           (job.c then counts no scratch for the job) */
    int (*alloc)(sinpe_plan *p);        /* the plan's memory; NULL: none */
    void (*bind)(sinpe_plan *p);        /* after sinpe_plan_bind set the destination; NULL */
    void (*release)(sinpe_plan *p);     /* what alloc took besides p->mem; NULL: nothing */
    const sinpe_stage *stages;
    int nstages;
} sinpe_kind;
/* The row of a kind, NULL outside 0 .. SINPE_JOB_KIND_COUNT - 1. */
const sinpe_kind *sinpe_kind_of(sinpe_job_kind kind);

/* The bytes a laid-out plan allocates: its scratch (the kind's floats), slots and itself. */
static inline int64_t sinpe_plan_bytes(const sinpe_plan *p, const sinpe_kind *k)
{
    int64_t nf = k->scratch ? k->scratch(p) : 0;
    return nf * (int64_t)sizeof(float) + p->nslots * (int64_t)sizeof(sinpe_slot)
           + (int64_t)sizeof(sinpe_plan);
}

/* job.c: the options' check, and the one check of a complete job (fresh: its destination is
 * not allocated yet), returning the options' backend context and operations; and the same
 * after completing the job (a fresh destination's shape, a growing table_rows), as
 * sinpe_job_prepare and sinpe_plan_prepare run it. */
int sinpe_opts_check(const sinpe_opts *o, sinpe_bctx *ctx, const sinpe_backend_ops **be);
int sinpe_job_checked(const sinpe_job *j, const sinpe_opts *o, int fresh, sinpe_bctx *ctx,
                      const sinpe_backend_ops **be);
int sinpe_job_complete_check(sinpe_job *j, const sinpe_opts *o, sinpe_bctx *ctx,
                             const sinpe_backend_ops **be);

/* The kinds' rows (kinds.c) -------------------------------------------------------------- */

/* table.c: TABLE and ADD */
extern const sinpe_stage sinpe_table_stages[4];
int sinpe_table_check(const sinpe_job *j);
int sinpe_table_kept(const sinpe_job *j, const sinpe_backend_ops *be);
int sinpe_table_fresh(sinpe_job *j);
void sinpe_table_complete(sinpe_job *j);
void sinpe_table_layout(sinpe_plan *p);
int64_t sinpe_table_scratch(const sinpe_plan *p);
int sinpe_table_alloc(sinpe_plan *p);
void sinpe_table_bind(sinpe_plan *p);
void sinpe_table_release(sinpe_plan *p);
/* rope.c: ROPE */
extern const sinpe_stage sinpe_rope_stages[1];
int sinpe_rope_check(const sinpe_job *j);
void sinpe_rope_setup(sinpe_plan *p);
/* map.c: MAP */
extern const sinpe_stage sinpe_map_stages[1];
int sinpe_map_check(const sinpe_job *j);
int sinpe_map_fresh(sinpe_job *j);
void sinpe_map_layout(sinpe_plan *p);
/* freqs.c: FREQS */
extern const sinpe_stage sinpe_freq_stages[1];
int sinpe_freq_check(const sinpe_job *j);
int sinpe_freq_fresh(sinpe_job *j);
void sinpe_freq_layout(sinpe_plan *p);

/* Below the kinds ------------------------------------------------------------------------- */

/* rows.c: a table's positions (their components, row axes, broadcast strides, rules, whether
 * they share memory with the destination, the position of a row) and its rows (the backends'
 * argument function; nrows rows of column block cb into out, ostride floats apart) */
int sinpe_ncomp(const sinpe_job *j);
int sinpe_pos_row_axes(const sinpe_job *j);
int sinpe_broadcast_positions(const sinpe_job *j, int64_t *strides);
int sinpe_positions_check(const sinpe_job *j);
int sinpe_positions_alias(const sinpe_job *j);
float sinpe_table_position(const sinpe_plan *p, int64_t r, int64_t off, int q);
float sinpe_table_argument(const void *plan, int64_t element);
void sinpe_table_rows(const sinpe_plan *p, sinpe_slot *sl, float *out, ptrdiff_t ostride,
                      const float *pos, int64_t first_row, int64_t table_row0, int64_t nrows,
                      int64_t cb);

/* rules.c: a destination's type, asked dtype (want_type, -1: any) and axes; no negative
 * axis; the bytes of n axes of w-byte elements (-1 past SINPE_MAX_SPAN); C-order strides.
 * (sinpe_check_base, a base's rule, is public: sinpe.h.) */
int sinpe_check_dst(const sinpe_array *x, int want_type);
int sinpe_check_axes(const sinpe_array *x);
int64_t sinpe_bytes_of(int n, const int64_t *shape, int64_t w);
void sinpe_c_order(sinpe_array *a);

static inline int64_t sinpe_ceil_div(int64_t a, int64_t b)
{
    return a / b + (a % b != 0);
}

/* The stage of kinds that run over p->count elements in blocks of SINPE_BLOCK (map.c,
 * freqs.c): its items and their work. */
static inline int64_t sinpe_block_items(const sinpe_plan *p)
{
    return sinpe_ceil_div(p->count, SINPE_BLOCK);
}

static inline int64_t sinpe_block_work(const sinpe_plan *p)
{
    (void)p;
    return SINPE_BLOCK;
}

#endif
