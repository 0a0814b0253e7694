/* sinpe: the C core's public API (pure C, no Python headers).
 *
 * The core computes the sinusoidal positional-encoding tables of Transformers and the
 * other deterministic encodings (presets, RoPE, ALiBi), step by step as the reference
 * libraries compute them (docs/numerics.md):
 *   c        = (float)(-log(base) / d_model)         (double log, then float)
 *   div[i]   = exp((float)(2i) * c)                  (float multiply, float exp)
 *   angle    = (float)pos * div[i]                   (float multiply)
 *   pe[pos, 2i] = sin(angle), pe[pos, 2i+1] = cos(angle)
 * with exp/sin/cos of the chosen backend in float32; other element types are rounded from
 * the float32 values as torch rounds them.
 *
 * Everything is a job (sinpe_job): a table written, a table added in place, a rotary
 * rotation, an elementwise map, or a frequency vector.  One check (sinpe_job_check) holds
 * every rule, memory included; a plan runs a checked job in steps of bounded work so that
 * a caller can stop between steps (Ctrl-C); sinpe_plan_prepare checks and plans in one
 * go, each rule once.  Backends and code paths are registries,
 * addressed by index (sinpe_backend_find, sinpe_path_name).  Functions return a status
 * code; nothing aborts.
 */
#ifndef SINPE_H
#define SINPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SINPE_OK = 0,
    SINPE_E_DMODEL = 1,     /* d_model (the last axis) odd or < 2 */
    SINPE_E_ROWS = 2,       /* a negative number of rows or a negative axis length */
    SINPE_E_BASE = 3,       /* base not finite or <= 0 */
    SINPE_E_OFFSET = 4,     /* offset < 0 */
    SINPE_E_LASTPOS = 5,    /* offset + rows - 1 does not fit in int64 */
    SINPE_E_SIZE = 6,       /* more bytes than memory can address */
    SINPE_E_NOMEM = 7,      /* a scratch allocation failed */
    SINPE_E_BACKEND = 8,    /* backend unknown or its library not loaded */
    SINPE_E_NULL = 9,       /* NULL pointer where memory is needed */
    SINPE_E_LOAD = 10,      /* a backend library could not be loaded */
    SINPE_E_PATH = 11,      /* code path unknown or not supported by this build or CPU */
    SINPE_E_TYPE = 12,      /* element type not supported there */
    SINPE_E_DIMS = 13,      /* too few or too many axes */
    SINPE_E_OVERLAP = 14,   /* two elements of the destination share memory */
    SINPE_E_UNDECIDED = 15, /* the overlap search gave up (pathological strides) */
    SINPE_E_FUNC = 16,      /* elementwise function or frequency kind unknown */
    SINPE_E_THREADS = 17,   /* threads < 1 or > SINPE_MAX_THREADS */
    SINPE_E_TABLE = 18,     /* table_rows < offset + rows */
    SINPE_E_PRESET = 19,    /* a preset table's description is inconsistent */
    SINPE_E_MEMORY = 20,    /* more than this machine's physical memory: refused (sinpe_job_need) */
    SINPE_E_SHAPE = 21,     /* the destination's shape is not the result's */
    SINPE_E_READONLY = 22,  /* the destination is read-only */
    SINPE_E_BOTH = 23,      /* positions given together with a nonzero offset */
    SINPE_E_BROADCAST = 24, /* positions do not broadcast to the destination's rows */
    SINPE_E_DTYPE = 25,     /* the asked element type (want_type) is not the destination's */
    SINPE_E_TORCH_THREADS = 26, /* the SLEEF profile's torch_threads outside 1 .. 4096 */
    SINPE_E_ROT = 27,       /* rope: rotated columns odd, < 2 or more than the last axis */
    SINPE_E_AXIS = 28,      /* rope: the sequence or batch axis is not an axis before the last */
    SINPE_E_TABLES = 29,    /* rope: cos/sin tables of another shape than (tables, seq, rot) */
    SINPE_E_KEPT = 30,      /* kept rows (a cache) that do not suit the job */
    SINPE_E_RUNTIME = 31,   /* an OpenMP runtime not loaded, or not one sinpe can run on */
    SINPE_E_FORM = 32,      /* rope: a form unknown, or not for float64 */
    SINPE_STATUS_COUNT = 33
} sinpe_status;

/* Element types: the first four can be written; all can hold positions. */
typedef enum {
    SINPE_F32 = 0, SINPE_F64, SINPE_F16, SINPE_BF16,
    SINPE_I8, SINPE_I16, SINPE_I32, SINPE_I64,
    SINPE_U8, SINPE_U16, SINPE_U32, SINPE_U64,
    SINPE_TYPE_COUNT
} sinpe_type;

#define SINPE_MAX_DIMS 64
#define SINPE_MAX_THREADS 256
#define SINPE_MAX_TORCH_THREADS 4096

/* The bytes of one element of a type (0 for an unknown type). */
int sinpe_type_size(sinpe_type t);

/* ---- registries: backends and code paths ----------------------------------------------- */

/* Backends, by index: "builtin" (correctly rounded, no dependency), "mkl" (oneMKL VML from
 * the mkl wheel), "torch" (oneMKL VML inside the installed torch), "sleef" (torch on 64-bit
 * Arm: SLEEF re-implemented, configured by sinpe_opts.sleef), "numpy", "tensorflow", "jax",
 * "onnxruntime" (those frameworks' float32 functions on x86-64, re-implemented). */
int sinpe_backend_count(void);
const char *sinpe_backend_name(int backend);       /* NULL outside 0 .. count-1 */
int sinpe_backend_find(const char *name);          /* -1 when unknown */
/* Loads a backend's library from path (dlopen; once per process, not thread-safe: the
 * caller serializes).  SINPE_E_LOAD with the reason in msg. */
int sinpe_backend_load(int backend, const char *path, char *msg, size_t msglen);
int sinpe_backend_ready(int backend);              /* 1 when it can run now */
int sinpe_backend_loadable(int backend);           /* 1 when it has a library to load */
int sinpe_backend_independent(int backend);        /* 1 when a result depends on its argument
                                                      alone (0: SLEEF's coupled lanes) */
const char *sinpe_backend_version(int backend);    /* the library's own version text, or "" */
int sinpe_backend_threading_layer(int backend);    /* mkl_rt's threading layer, else -1 */

/* Code paths of the built-in kernels (the same bits on every path), by index: "scalar",
 * "avx2", "avx512", "neon".  available: built in and supported by this CPU (probed once);
 * verified: its exhaustive check is on record (sinpe_path_record), so the probe may choose
 * it; best: the last available and verified path. */
int sinpe_path_count(void);
const char *sinpe_path_name(int path);
int sinpe_path_available(int path);
int sinpe_path_verified(int path);
int sinpe_path_best(void);
/* A path's verification records (k = 0, 1, ...): the exhaustive check of one function. */
typedef struct {
    const char *func, *cpu, *date, *command;
    uint64_t inputs, wrong;
    double seconds;
} sinpe_record;
int sinpe_path_record(int path, int k, sinpe_record *out); /* 0 when there is no record k */

/* What the CPU probe found (once per process): vendor and features by index; x86 flags
 * count only when the OS saves their registers. */
const char *sinpe_cpu_vendor(void);
const char *sinpe_cpu_feature(int k, int *value); /* name of feature k (NULL past the last) */

/* ---- jobs ------------------------------------------------------------------------------ */

/* Per-call options: plain values (the Python package resolves names and defaults). */
typedef struct {
    int backend;  /* a backend index */
    int path;     /* the built-in kernels' code path (also the stores' and adds') */
    int threads;  /* 1 .. SINPE_MAX_THREADS; 1 runs on the calling thread only */
    struct {
        int trig;          /* 0: SLEEF's u10 sin/cos (torch 2.13, 2.14); 1: u35 (2.15) */
        int lanes;         /* 4 (NEON, SVE128) or 8 (SVE256) */
        int torch_threads; /* torch's thread count: where its vectors start */
    } sleef;
    int pow_lanes; /* x86-64 torch's float32 vector width for pow (16, 8; 0: DEFAULT) */
} sinpe_opts;

/* Options for the built-in kernels on the best path, threads 1. */
void sinpe_opts_init(sinpe_opts *o);

/* A strided array: element (i0, ...) at data + sum(i_k * strides[k]) bytes (any sign, any
 * layout); a destination's elements must not share memory. */
typedef struct {
    void *data;
    sinpe_type type;
    int ndim;
    int64_t shape[SINPE_MAX_DIMS];
    int64_t strides[SINPE_MAX_DIMS];
    int readonly;
} sinpe_array;

typedef enum {
    SINPE_JOB_TABLE = 0, /* dst = the table */
    SINPE_JOB_ADD = 1,   /* dst += the table, as torch's x.add_(pe) for a float32 pe */
    SINPE_JOB_ROPE = 2,  /* dst rotated in place by cos/sin tables */
    SINPE_JOB_MAP = 3,   /* dst = func(src), float32 */
    SINPE_JOB_FREQS = 4, /* dst = a preset's frequency vector */
    SINPE_JOB_KIND_COUNT = 5
} sinpe_job_kind;

/* Where a table row's position comes from. */
typedef enum {
    SINPE_POS_OFFSET = 0, /* row r: offset + r */
    SINPE_POS_ARRAY = 1,  /* read from an array of any type, broadcast to the rows */
    SINPE_POS_GRID = 2    /* row lead + r of an H x W grid: components (r / W, r % W) */
} sinpe_pos_mode;

/* Column kinds of a preset table (sinpe_preset.col[j] = 4 * t + kind). */
typedef enum { SINPE_COL_SIN = 0, SINPE_COL_COS = 1, SINPE_COL_ANGLE = 2, SINPE_COL_ZERO = 3 } sinpe_col;

/* A preset table: each row holds functions of T angles of the row's position.
 *   float32: a[t] = p[comp[t]] * freq[t], then a[t] = scale * a[t] when scaled;
 *   float64: a[t] = (double)p[comp[t]] * freq64[t], or / freq64[t] when f64_div;
 * where p[q] is component q of the row's position (ncomp components).  Column j holds sin,
 * cos, the angle itself, or 0 of a[col[j] / 4]: in float32, sin and cos of the backend;
 * in float64, the C library's sin and cos rounded to float32 (and the angle rounded to
 * float32).  zero_row: one row written as zeros (by offset: the row whose position is
 * zero_row; otherwise the flat row index), -1 for none.  trow_shift: where table row r lies
 * in the angle tensor torch evaluated in one call (r + trow_shift; 0 or -1, a leading pad
 * row left out), for the SLEEF backend's vectors. */
typedef struct {
    int64_t nang;
    const float *freq;
    const double *freq64;
    int f64_div;
    int ncomp;
    const int32_t *comp; /* NULL: every angle uses component 0 */
    int scaled;
    float scale;
    const int64_t *col;  /* one per column */
    int64_t ncol;
    int64_t zero_row;
    int64_t trow_shift;
    int out_scaled;      /* each float32 value v of a row becomes v * out_scale (before any */
    float out_scale;     /* rounding to the result's type: transformers' attention scaling) */
} sinpe_preset;

/* Frequency vectors of the presets: out[i] for i < n, from the integer
 * k_i = start + step * (i / group) (a float32 value, as torch's arange(...).float()):
 *   EXP_MUL:    exp(k_i * a) * m            (float32 steps; the multiply by m when m != 1)
 *   EXP_MULDIV: exp((k_i * a) / b)
 *   POW:        base ** (k_i / b) (or base ** (k_i * a) when a != 0: XLA divides by a
 *               scalar as a multiply by its float32 reciprocal), then 1 / that when recip
 *   POW64:      (double) base ** (k_i / b), then 1 / that when recip (float64 out)
 *   EXP_LOG:    exp(k_i * (log(base) / b)), log(base) glibc's logf and the division in
 *               float32 (MLX's frequencies, with start 0 and step -1)
 * exp and pow of the backend (pow as torch computes it, on the backends with torch's
 * bits); POW64 uses the C library's pow on every backend. */
typedef enum {
    SINPE_FREQ_EXP_MUL = 0, SINPE_FREQ_EXP_MULDIV, SINPE_FREQ_POW, SINPE_FREQ_POW64,
    SINPE_FREQ_EXP_LOG, SINPE_FREQ_COUNT
} sinpe_freq_kind;
typedef struct {
    sinpe_freq_kind kind;
    int64_t start, step, group;
    float a, b, m, base;
    double b64, base64;
    int recip;
} sinpe_freq;

/* MAP functions: exp, sin, cos of the backend; LOG glibc's logf (its FMA build) on every
 * backend (the C library's log that llama.cpp's and MLX's parameters go through). */
typedef enum {
    SINPE_FN_EXP = 0, SINPE_FN_SIN = 1, SINPE_FN_COS = 2, SINPE_FN_LOG = 3, SINPE_FN_COUNT
} sinpe_func;

/* Rows of a table kept by the caller (sinpe_job.kept). */
typedef struct {
    float *data;                  /* NULL: none */
    int64_t first, rows, stride;  /* positions first .. first + rows - 1; stride in floats */
    int64_t fill_first, fill_end; /* positions computed into it first */
    int64_t ready_first, ready_end; /* positions the caller filled before (none: empty) */
    int64_t reserve;              /* bytes the caller allocates for it after prepare (data
                                   * NULL then), counted by the memory rule */
} sinpe_kept;

/* A job.  Every kind writes dst (see sinpe_job_kind); fresh = 1 says dst.data is allocated
 * by the caller after sinpe_job_prepare, which sets dst's shape and C-order strides and
 * counts its bytes toward the memory check.
 *
 * TABLE / ADD: the table has `cols` columns (d_model, or a preset's columns; for ADD the
 *   last axis of dst) and rows from pos:
 *     OFFSET: rows offset .. offset + rows - 1 (ADD: rows = dst's second-to-last axis,
 *       in every element of the leading axes); TABLE's dst is (rows, cols);
 *     ARRAY: pos.shape (TABLE: dst is pos.shape + (cols,); ADD: pos broadcasts to
 *       dst.shape[:-1]), rounded to float32 as torch's .float() does; positions that share
 *       memory with dst are copied first;
 *     GRID: TABLE with a preset of 2 components only, dst is (grid_lead + grid_h * grid_w,
 *       cols); positions made from the row index (no positions array).
 *   base: the sinusoidal table's (ignored with a preset).  table_rows: the length of the
 *   table torch computed in one call, whose element order decides the SLEEF backend's
 *   vectors (by offset: rows 0 .. table_rows-1, >= offset + rows; 0 means offset + rows;
 *   table_grow = 1 makes a too short table_rows the rows' own length instead of an error;
 *   own_tensor = 1: the rows offset .. offset + rows - 1 themselves, as a library that
 *   evaluates arange(offset, offset + rows) does).
 *   want_type: the element type asked for (-1: any), which must be dst's.  lead_one: a
 *   TABLE's dst may be (1,) + its shape (the (1, max_len, d_model) buffer of a torch module).
 * ROPE: dst (..., D) rotated in place, the first rot elements (even, >= 2) of each vector
 *   along the last axis by the cos/sin row (b, s) of tables of shape
 *   (tables, dst.shape[seq_axis], rot) (float32, float16 or bfloat16, widened exactly; any
 *   strides, 0 included: broadcast views): s its index along seq_axis, b its index along
 *   batch_axis (tables > 1; -1 for none) or 0.  With rope.src (ndim > 0 or data not NULL; dst's
 *   shape and type, the same memory as dst or none of it; none: all zero) dst is src rotated, the columns past rot
 *   copied.  rope.second = 1: dst2 (and src2 likewise) rotated by the same tables and axes in
 *   the same job (transformers' q and k); the tables share no memory with a destination, nor
 *   the destinations with each other or with the other's source.  pairs = 0: transformers' rotate_half of the halves,
 *   every operation rounded to dst's type; pairs = 1: rotary-embedding-torch's pairs, in
 *   float32 (float64 for a float64 dst), rounded once.
 *   kept: TABLE and ADD without a preset, by offset or positions: float32 rows of this
 *   job's table that the caller keeps (a cache of earlier calls; NULL data: none).  Row r of
 *   kept.data holds position kept.first + r (all cols values, kept.stride floats apart);
 *   positions kept.fill_first .. kept.fill_end - 1 are computed into it first, as this job
 *   computes its rows; kept.ready_first .. ready_end - 1 are the rows the caller filled
 *   before, read as they are.  Only rows of these two ranges (one interval together) are
 *   read, whatever else the buffer holds: by offset every row must lie in them; by
 *   positions (backends whose results do not couple only) integral positions in them are
 *   read, the others computed.  kept.reserve: bytes of a buffer the caller allocates after
 *   sinpe_job_prepare (data NULL until then; the job is checked again once it is set),
 *   counted with the fresh destination by the memory rule.  Not with own_tensor; it must not share memory with
 *   dst.
 * MAP: dst (float32) = func(src) for src (float32, C order) of dst's shape.
 * FREQS: dst (rows values, float32, or float64 for POW64) = the frequency vector *freq. */
typedef struct {
    sinpe_job_kind kind;
    sinpe_array dst;
    int fresh;
    int want_type;
    int64_t cols, rows;
    double base;
    int64_t offset;
    int64_t table_rows;
    int table_grow;
    int lead_one; /* TABLE: dst may have one more leading axis of length 1 (a torch buffer) */
    int own_tensor; /* OFFSET: torch's tensor is the rows themselves, not a table from row 0 */
    struct {
        sinpe_pos_mode mode;
        sinpe_array at;          /* ARRAY: the positions; with a preset of 2 components,
                                    their last axis (of length 2) holds the components */
        int64_t grid_h, grid_w;  /* GRID: rows grid_lead .. grid_lead + h*w - 1 */
        int64_t grid_lead;       /* GRID: rows before the grid, at position (0, 0) */
    } pos;
    const sinpe_preset *preset;
    sinpe_kept kept;
    struct {
        sinpe_array cos, sin; /* float32, float16 or bfloat16, any strides, (tables, seq, rot);
                                 (tables, 0, rot) for an empty x */
        int seq_axis, batch_axis, pairs;
        int form;             /* how the rotation rounds: 0 torch's eager ops, else
                                 sinpe_rope_form flags (an engine's arithmetic) */
        sinpe_array src;      /* ndim 0, data NULL: dst in place; else dst = src rotated */
        int second;           /* 1: dst2 (= src2 rotated, or in place) by the same tables */
        sinpe_array dst2, src2;
    } rope;
    sinpe_func func;
    sinpe_array src;
    const sinpe_freq *freq;
} sinpe_job;

/* ROPE: the arithmetic of a rotation other than torch's eager ops (y0 = x0 c - x1 s,
 * y1 = x1 c + x0 s on the pair (x0, x1) of one rotation), as an engine computes it; flags. */
typedef enum {
    SINPE_ROPE_ONE = 1,        /* float32 arithmetic, one rounding to x's type at the end */
    SINPE_ROPE_FMA = 2,        /* float32 x: y0 = fma(x0, c, -(x1 s)), y1 = fma(x0, s, x1 c) */
    SINPE_ROPE_HALF_CACHE = 4, /* both elements of a pair read the pair's first column (an
                                  engine's cache of rot / 2 columns, from the given tables) */
    SINPE_ROPE_TAIL16 = 8,    /* with FMA, the pairs layout: in a last block of fewer than 16
                                  columns, the pairs after its first without FMA (ONNX
                                  Runtime's x86-64 kernel) */
    SINPE_ROPE_EACH = 16,      /* every op rounded in x's type in the pairs layout too (the
                                  halves' eager rule: MLX's graph of ops) */
    SINPE_ROPE_BF16 = 32,      /* a float32 or float16 x computed in bfloat16 (OpenVINO's
                                  inference precision on CPUs with AVX512-BF16): x's values
                                  rounded to bfloat16 first (float32: to nearest even; float16:
                                  OpenVINO's conversion, below), each result rounded to a
                                  bfloat16 value, then stored in x's type */
    SINPE_ROPE_OV_TABLES = 64, /* OpenVINO's reading of the tables: as they are (float32 tables
                                  of a float16 x too: its conversion is fused into the node;
                                  llama.cpp's float32 cache likewise), float32 tables of a
                                  bfloat16 x cast by its conversion
                                  ((bits + ((bits & 0x10000) >> 1)) >> 16) */
    SINPE_ROPE_OV_STORE = 128, /* bfloat16 results by that conversion (OpenVINO's C++ loop),
                                  not to nearest even */
    SINPE_ROPE_TAIL8 = 256,    /* with FMA, the pairs layout: the pairs past the last complete
                                  block of 8 columns without FMA (llama.cpp's ggml as gcc 12
                                  vectorises its interleaved loop for x86-64) */
    SINPE_ROPE_FORMS = 511     /* every flag */
} sinpe_rope_form;

/* A TABLE job for a C-contiguous float32 destination of the given shape. */
void sinpe_job_init(sinpe_job *j, void *data, int ndim, const int64_t *shape, double base);

/* Completes a job (a fresh destination's shape and strides, a growing table_rows) and
 * checks every rule: types, axes, sizes, values, layouts (no two destination elements
 * share memory), options, and memory (the fresh destination plus scratch within this
 * machine's physical memory).  SINPE_OK when the job can run. */
int sinpe_job_prepare(sinpe_job *j, const sinpe_opts *o);
/* The check alone, for complete jobs. */
int sinpe_job_check(const sinpe_job *j, const sinpe_opts *o);

/* The memory a job needs: a fresh destination, scratch, and this machine's memory. */
typedef struct {
    int64_t fresh, scratch, physical; /* bytes; physical 0 when unknown */
} sinpe_need;
void sinpe_job_need(const sinpe_job *j, const sinpe_opts *o, sinpe_need *need);

/* The memory rule alone, for an array of ndim axes of shape and type t about to be made
 * (ndim -1: none; plus scratch bytes): SINPE_E_SIZE past what memory can address, SINPE_E_MEMORY past this
 * machine's physical memory (need filled either way).  Callers that build inputs of a job
 * (a preset's frequencies, its result) ask before they allocate. */
int sinpe_admit(int ndim, const int64_t *shape, sinpe_type t, int64_t scratch, sinpe_need *need);

/* The elements of n axes of shape: 0 when one of them is empty, INT64_MAX when the product
 * passes int64 (the one element count of the core and the binding). */
int64_t sinpe_elements(int n, const int64_t *shape);

/* Plans run a checked job in steps.  sinpe_plan_new checks the job, allocates all
 * scratch memory and writes nothing; each sinpe_plan_step does about `budget` units of
 * work (one unit: about one value computed; storing or adding a value counts 1/8), spread
 * over the threads, and sets *done when the job is finished.  The work is ordered: rows in
 * blocks of rows, then column blocks (d_model > 8192), then blocks of the leading axes; a
 * job stopped between steps has done a prefix of that order. */
typedef struct sinpe_plan sinpe_plan;
int sinpe_plan_new(const sinpe_job *j, const sinpe_opts *o, sinpe_plan **plan);
/* One call's preparation with every check run once: completes the job as sinpe_job_prepare
 * does, checks it, lays out its plan, admits its memory (a fresh destination plus the
 * scratch) and allocates the scratch; writes nothing.  For a fresh job the caller then
 * allocates the destination (C order, of the shape prepare set) and hands it over with
 * sinpe_plan_bind before the first step (SINPE_E_SHAPE when its strides or alignment are
 * not the ones the plan was laid out for).  The plan keeps its own copy of the job, so a
 * job changed after preparing changes nothing the plan does. */
int sinpe_plan_prepare(sinpe_job *j, const sinpe_opts *o, sinpe_plan **plan);
int sinpe_plan_bind(sinpe_plan *p, void *data, const int64_t *strides);
int sinpe_plan_step(sinpe_plan *p, int64_t budget, int *done);
void sinpe_plan_free(sinpe_plan *p);

/* A whole job at once: prepare, plan, steps, free. */
int sinpe_run(sinpe_job *j, const sinpe_opts *o);

/* Conveniences for C callers: a C-contiguous float32 table (max_len, d_model); the
 * in-place add of rows offset .. offset+len-1 to nbatch blocks of len rows of d_model
 * contiguous floats (strides in floats); func of n floats. */
int sinpe_table(float *out, int64_t max_len, int64_t d_model, double base, const sinpe_opts *o);
int sinpe_add(float *x, int64_t nbatch, int64_t len, int64_t d_model, ptrdiff_t batch_stride,
              ptrdiff_t row_stride, int64_t offset, double base, const sinpe_opts *o);
int sinpe_map(sinpe_func func, const float *in, float *out, int64_t n, const sinpe_opts *o);

/* The held add: x += rows in every block of x's leading axes, rows a (L, d) float32 table the
 * caller holds (computed by a job before) for an x of shape (..., L, d), with the code path's
 * adds, rounded as an ADD job rounds (x's type: float32, float64, float16 or bfloat16), on up
 * to `threads` threads (1 .. SINPE_MAX_THREADS; more than one only where a second pays).
 * Only the simplest layout: x writable, C-contiguous, aligned to its element, not empty,
 * sharing no memory with rows (C-contiguous, 4-byte aligned).  SINPE_OK; else a status and
 * nothing written (the caller goes a job's way, whose check names it). */
int sinpe_add_held(const sinpe_array *x, const sinpe_array *rows, int path, int threads);

/* out[k] = in[k] rounded to type t (float32, float64, float16 or bfloat16) as tables are
 * rounded (for tests). */
void sinpe_round(const float *in, void *out, int64_t n, sinpe_type t);

/* Physical memory of this machine in bytes, 0 when unknown. */
int64_t sinpe_physical_memory(void);

/* A freshly allocated output of `bytes` bytes at data, before anything touches it: with
 * huge = 1 its 2 MiB-aligned part is advised to use transparent huge pages (Linux
 * madvise MADV_HUGEPAGE).  Returns 1 when the advice was taken. */
int sinpe_fresh_memory(void *data, int64_t bytes, int huge);

/* The rule of a base (and of any parameter the presets raise to powers or divide by):
 * finite and > 0.  SINPE_OK or SINPE_E_BASE. */
int sinpe_check_base(double base);

/* Where parallel work runs: on an OpenMP runtime the process has already loaded (its file
 * name or path as dlopen takes it: GNU libgomp, whose GOMP_parallel torch's parallel loops
 * run on), so that sinpe's threads are that library's workers; NULL: sinpe's own threads.
 * SINPE_OK, or SINPE_E_RUNTIME when the library is not loaded, lacks libgomp's entry points,
 * or another runtime was chosen before in this process (and always on Windows).  A forked
 * child runs on sinpe's own threads (libgomp's workers are not in it). */
int sinpe_set_thread_runtime(const char *openmp_library);
/* 1 while an OpenMP runtime runs the parallel work, else 0. */
int sinpe_thread_runtime(void);

/* Human-readable text of a status code (static storage). */
const char *sinpe_strerror(int status);

#ifdef __cplusplus
}
#endif
#endif
