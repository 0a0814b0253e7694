/* sinpe core: sinusoidal positional-encoding tables.
 *
 * Pure C (no Python headers).  Every function fills or updates caller-owned
 * memory and returns a status code; nothing aborts.  The numerics follow the
 * reference PyTorch module step by step (see README "Numerics"):
 *   c        = (float)(-log(base) / d_model)         (double log, then float)
 *   div[i]   = exp((float)(2i) * c)                  (float multiply, float exp)
 *   angle    = (float)pos * div[i]                   (float multiply)
 *   pe[pos, 2i] = sin(angle), pe[pos, 2i+1] = cos(angle)
 * with exp/sin/cos from the selected backend, in float32; other element
 * types are rounded from the float32 values as torch rounds them.
 *
 * The general entry is a job (sinpe_job): a strided destination of any
 * layout and element type, written (the table) or updated in place
 * (x.add_(pe)), with positions either offset + row index or read from a
 * strided array of integers or reals.  A plan runs a job in steps of bounded
 * work, so that a caller can stop between steps (Ctrl-C).
 */
#ifndef SINPE_CORE_H
#define SINPE_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    SINPE_OK = 0,
    SINPE_E_DMODEL = 1,    /* d_model (the last axis) odd or < 2 */
    SINPE_E_ROWS = 2,      /* a negative number of rows or a negative axis length */
    SINPE_E_BASE = 3,      /* base not finite or <= 0 */
    SINPE_E_OFFSET = 4,    /* offset < 0 */
    SINPE_E_LASTPOS = 5,   /* offset + rows - 1 does not fit in int64 */
    SINPE_E_SIZE = 6,      /* more bytes than memory can address */
    SINPE_E_NOMEM = 7,     /* a scratch allocation failed */
    SINPE_E_BACKEND = 8,   /* backend unknown or not loaded */
    SINPE_E_NULL = 9,      /* NULL pointer where memory is needed */
    SINPE_E_LOAD = 10,     /* a backend library could not be loaded */
    SINPE_E_PATH = 11,     /* code path unknown or not supported by this build or CPU */
    SINPE_E_TYPE = 12,     /* element type not supported there */
    SINPE_E_DIMS = 13,     /* too few or too many axes */
    SINPE_E_OVERLAP = 14,  /* two elements of the destination share memory */
    SINPE_E_UNDECIDED = 15,/* the overlap search gave up (pathological strides) */
    SINPE_E_FUNC = 16,     /* elementwise function unknown */
    SINPE_E_THREADS = 17,  /* threads < 1 or > SINPE_MAX_THREADS */
    SINPE_E_TABLE = 18,    /* table_rows < offset + rows */
    SINPE_E_SPEC = 19      /* a preset table's description (sinpe_spec) is inconsistent */
} sinpe_status;

typedef enum {
    SINPE_BACKEND_BUILTIN = 0, /* correctly rounded kernels, no dependency */
    SINPE_BACKEND_MKL = 1,     /* oneMKL VML HA from the mkl wheel, loaded at run time */
    SINPE_BACKEND_TORCH = 2,   /* oneMKL VML HA inside the installed torch's libtorch_cpu */
    SINPE_BACKEND_SLEEF = 3,   /* torch on 64-bit Arm: SLEEF, re-implemented (opts.sleef) */
    SINPE_BACKEND_COUNT = 4
} sinpe_backend;

/* Which SLEEF sin/cos torch on 64-bit Arm calls (exp is always u10). */
typedef enum {
    SINPE_SLEEF_U10 = 0, /* Sleef_{sin,cos}f4_u10 / f8_u10: torch 2.13 */
    SINPE_SLEEF_U35 = 1  /* Sleef_{sin,cos}f4_u35 / f8_u35: torch 2.15 */
} sinpe_sleef_trig;

/* A SLEEF profile: torch's variant, its vector width, and its thread count, which
 * decides where its vectors start (torch splits an elementwise op over its threads in
 * chunks of ceil(N / threads) elements, grain 2048, and loads each chunk in vectors of
 * `lanes` elements, the last one zero-padded). */
typedef struct {
    sinpe_sleef_trig trig;
    int lanes;         /* 4 (NEON, SVE128) or 8 (SVE256) */
    int torch_threads; /* >= 1 */
} sinpe_sleef;

/* Code paths of the built-in backend (the same bits on every path). */
typedef enum {
    SINPE_PATH_SCALAR = 0, /* portable C */
    SINPE_PATH_AVX2 = 1,   /* x86-64 AVX2 + FMA */
    SINPE_PATH_NEON = 2,   /* AArch64 Advanced SIMD */
    SINPE_PATH_AVX512 = 3, /* x86-64 AVX-512F */
    SINPE_PATH_COUNT = 4
} sinpe_path;

/* Element types: the first four can be written; all can hold positions. */
typedef enum {
    SINPE_F32 = 0, SINPE_F64, SINPE_F16, SINPE_BF16,
    SINPE_I8, SINPE_I16, SINPE_I32, SINPE_I64,
    SINPE_U8, SINPE_U16, SINPE_U32, SINPE_U64,
    SINPE_TYPE_COUNT
} sinpe_type;

#define SINPE_MAX_DIMS 64
#define SINPE_MAX_THREADS 256

/* Per-call options.  threads = 1 runs on the calling thread only. */
typedef struct {
    sinpe_backend backend;
    sinpe_path path; /* the built-in backend's code path */
    int threads;
    sinpe_sleef sleef; /* the 'sleef' backend's profile */
} sinpe_opts;

/* Column kinds of a preset table (sinpe_spec.col[j] = 4 * t + kind). */
typedef enum { SINPE_COL_SIN = 0, SINPE_COL_COS = 1, SINPE_COL_ANGLE = 2, SINPE_COL_ZERO = 3 } sinpe_col;

/* A preset table: each row holds functions of T angles of the row's position.
 *   float32: a[t] = p[comp[t]] * freq[t], then a[t] = scale * a[t] when scaled;
 *   float64: a[t] = (double)p[comp[t]] * freq64[t], or / freq64[t] when f64_div;
 * where p[q] is component q of the row's position (ncomp components: positions read from
 * an array with a trailing component axis, pos_comp_stride bytes apart; by offset one,
 * offset + row).  Column j holds sin, cos, the angle itself, or 0 of a[col[j] / 4]: in
 * float32, sin and cos of the backend; in float64, the C library's sin and cos rounded to
 * float32 (and the angle rounded to float32).  zero_row: one row written as zeros
 * (by offset: the row whose position is zero_row; by positions: the flat row index), -1
 * for none.  torch_rows / trow_shift: the rows of the angle tensor torch evaluated in one
 * call and where table row r lies in it (r + trow_shift), for the SLEEF backend's
 * vectors (0 / 0: the table's own rows). */
typedef struct {
    int64_t nang;
    const float *freq;
    const double *freq64;
    int f64_div;
    int ncomp;
    const int32_t *comp; /* NULL: every angle uses component 0 */
    int scaled;
    float scale;
    const int64_t *col;  /* one per element of the last axis */
    int64_t zero_row;
    int64_t trow_shift;
} sinpe_spec;

/* A job.  The destination has ndim axes (..., d_model); element (i0, ...)
 * is at data + sum(i_k * strides[k]) bytes (any sign, any layout; elements
 * must not share memory).
 *   use_pos = 0: the row at index r of axis ndim-2 has position offset + r
 *     (rounded to float32), in every element of the leading axes (ndim >= 2).
 *   use_pos = 1: the row at index (i0, ..., i_{ndim-2}) has position
 *     pos + sum(i_k * pos_strides[k]) bytes, of type pos_type (0 strides
 *     broadcast), rounded to float32 as torch's .float() does (ndim >= 1).
 * add = 0 writes the table; add = 1 adds it in place, as torch's
 * x.add_(pe) for x of the destination's type and a float32 pe.  When the
 * positions share memory with the destination they are copied first. */
typedef struct {
    void *data;
    sinpe_type type;
    int ndim;
    int64_t shape[SINPE_MAX_DIMS];
    int64_t strides[SINPE_MAX_DIMS];
    int add;
    double base;
    int64_t offset;
    int use_pos;
    const void *pos;
    sinpe_type pos_type;
    int64_t pos_strides[SINPE_MAX_DIMS];
    /* The length of the table torch computed in one call, whose element order decides the
     * SLEEF backend's vectors: by offset, rows 0 .. table_rows-1 (>= offset + rows; 0 means
     * offset + rows); by positions, the positions themselves (table_rows is ignored). */
    int64_t table_rows;
    /* NULL: the sinusoidal table of base (d_model = the last axis); else a preset table
     * (the last axis has one element per col entry; base is ignored) */
    const sinpe_spec *spec;
    int64_t pos_comp_stride; /* with spec and positions: bytes between components */
} sinpe_job;

/* Sets a job for a C-contiguous float32 destination of the given shape. */
void sinpe_job_init(sinpe_job *j, void *data, int ndim, const int64_t *shape, double base);

/* Checks every rule of a job that does not need its memory (types, axes,
 * d_model, base, offset, sizes, that no two destination elements share
 * memory) and the options.  SINPE_OK when the job can run. */
int sinpe_job_check(const sinpe_job *j, const sinpe_opts *o);

/* Bytes of scratch memory a plan of this job takes (divisors, per-thread
 * buffers, a copy of positions that share memory with the destination). */
int64_t sinpe_job_scratch_bytes(const sinpe_job *j, const sinpe_opts *o);

/* The bytes of one element of a type (0 for an unknown type). */
int sinpe_type_size(sinpe_type t);

/* Physical memory of this machine in bytes, 0 when unknown. */
int64_t sinpe_physical_memory(void);

/* Plans run a checked job in steps.  sinpe_plan_new checks the job,
 * allocates all scratch memory and writes nothing; each sinpe_plan_step does
 * about `budget` units of work (one unit: about one table value computed;
 * storing or adding a value counts 1/8), spread over the threads, and sets
 * *done when the job is finished.  The work is ordered: rows in blocks of rows,
 * then column blocks (d_model > 8192), then blocks of the leading axes; a
 * job stopped between steps has done a prefix of that order. */
typedef struct sinpe_plan sinpe_plan;
int sinpe_plan_new(const sinpe_job *j, const sinpe_opts *o, sinpe_plan **plan);
int sinpe_plan_step(sinpe_plan *p, int64_t budget, int *done);
void sinpe_plan_free(sinpe_plan *p);

/* A whole job at once: check, plan, steps, free. */
int sinpe_run(const sinpe_job *j, const sinpe_opts *o);

/* Convenience for C callers: a C-contiguous float32 table (max_len,
 * d_model), and the in-place add of rows offset .. offset+len-1 to nbatch
 * blocks of len rows of d_model contiguous floats (strides in floats). */
int sinpe_table(float *out, int64_t max_len, int64_t d_model, double base, const sinpe_opts *o);
int sinpe_add(float *x, int64_t nbatch, int64_t len, int64_t d_model, ptrdiff_t batch_stride,
              ptrdiff_t row_stride, int64_t offset, double base, const sinpe_opts *o);

/* out[k] = in[k] rounded to type t (float32, float64, float16 or bfloat16)
 * as tables are rounded (for tests). */
void sinpe_round(const float *in, void *out, int64_t n, sinpe_type t);

/* Elementwise functions of a backend (for tests and tools): func 0 exp,
 * 1 sin, 2 cos; n elements from in to out (through the path's block sin/cos
 * for the built-in backend). */
int sinpe_map(int func, const float *in, float *out, size_t n, const sinpe_opts *o);

/* Code paths: availability on this build and CPU (probed once), the
 * fastest available, names. */
int sinpe_path_available(sinpe_path p);
sinpe_path sinpe_path_best(void);
const char *sinpe_path_name(sinpe_path p);

/* What the CPU probe found (once per process; sinpe_cpu.c).  The x86 flags
 * count only when the OS saves the registers (YMM for AVX2/FMA, ZMM for
 * AVX-512). */
typedef struct {
    char vendor[16]; /* "GenuineIntel", "AuthenticAMD", "arm64", ... */
    int fma, avx2, avx512f, avx512dq, avx512bw, avx512vl, f16c, os_ymm, os_zmm, neon;
} sinpe_cpu_info;
const sinpe_cpu_info *sinpe_cpu(void);

/* Frequency vectors of the presets (sinpe_freqs.c): out[i] for i < n, from the integer
 * k_i = start + step * (i / group) (a float32 value, as torch's arange(...).float()):
 *   EXP_MUL:    exp(k_i * a) * m            (float32 steps; the multiply by m when m != 1)
 *   EXP_MULDIV: exp((k_i * a) / b)
 *   POW:        base ** (k_i / b), then 1 / that when recip
 *   POW64:      (double) base ** (k_i / b), then 1 / that when recip (float64 out)
 * (ALiBi's torch.pow(base, int32 powers) is POW with b = 1.)
 * exp and pow of the backend: the built-in's correctly rounded ones; oneMKL's exp with
 * pow as torch computes it (pow_lanes: x86-64 torch's float32 vector width, 0 for its DEFAULT
 * capability; the C library's powf for the rest); the 'sleef' backend's SLEEF exp and
 * torch-on-aarch64's pow.  POW64 uses the C library's pow on every backend. */
typedef enum {
    SINPE_FREQ_EXP_MUL = 0, SINPE_FREQ_EXP_MULDIV, SINPE_FREQ_POW, SINPE_FREQ_POW64,
    SINPE_FREQ_COUNT
} sinpe_freq_kind;
typedef struct {
    sinpe_freq_kind kind;
    int64_t start, step, group;
    float a, b, m, base;
    double b64, base64;
    int recip;
    int pow_lanes;
} sinpe_freq;
int sinpe_freqs(const sinpe_freq *f, void *out, int64_t n, const sinpe_opts *o);

/* Rotary position embedding applied in place (sinpe_rope.c): x has ndim >= 2 axes
 * (..., D); every vector along the last axis has its first `rot` elements (even) rotated by
 * the cos/sin of its position: the table row (b, s) of cos and sin (float32, C order,
 * shape (tables, shape[seq_axis], rot)), with s its index along seq_axis and b its index
 * along batch_axis (tables > 1) or 0 (tables = 1, batch_axis -1).
 *   pairs = 0 (transformers' apply_rotary_pos_emb, rotate_half of the halves):
 *     y = x * cos + cat(-x2, x1) * sin, with cos and sin rounded to x's type first and
 *     every operation rounded to x's type (torch's eager ops in that dtype);
 *   pairs = 1 (rotary-embedding-torch's apply_rotary_emb, pairwise rotate_half):
 *     y = x * cos + (-x_odd, x_even) * sin in float32 (float64 for a float64 x), rounded
 *     once to x's type (torch's promotion of x with float32 cos/sin).
 * No two elements of x may share memory. */
typedef struct {
    void *data;
    sinpe_type type;
    int ndim;
    int64_t shape[SINPE_MAX_DIMS], strides[SINPE_MAX_DIMS];
    int seq_axis, batch_axis;
    int64_t rot, tables;
    const float *cos, *sin;
    int pairs;
} sinpe_rope;
int sinpe_rope_check(const sinpe_rope *r);
int sinpe_rope_run(const sinpe_rope *r, int threads);

/* A freshly allocated output of `bytes` bytes at data, before anything touches it
 * (sinpe_mem.c): with SINPE_FRESH_HUGE, its 2 MiB-aligned part is advised to use
 * transparent huge pages (Linux madvise MADV_HUGEPAGE), so that the threads filling it take
 * one page fault per 2 MiB instead of per 4 KiB.  Returns 1 when the advice was taken. */
enum { SINPE_FRESH_PLAIN = 0, SINPE_FRESH_HUGE = 1 };
int sinpe_fresh_memory(void *data, int64_t bytes, int how);

/* Human-readable text of a status code (static storage). */
const char *sinpe_strerror(int status);

/* oneMKL VML libraries (sinpe_mkl.c): the `mkl` wheel's mkl_rt for the
 * 'mkl' backend, torch's libtorch_cpu for the 'torch' backend.  Loads the
 * library at path (dlopen / LoadLibrary; a library already in the process is
 * shared, not loaded twice), resolves vmsExp/vmsSin/vmsCos and
 * MKL_Get_Version_String (for mkl_rt also selects the sequential threading
 * layer and the LP64 interface) and warms the functions up once.  On
 * failure, msg receives the reason.  Not thread-safe: call once, early. */
typedef enum { SINPE_VML_MKL = 0, SINPE_VML_TORCH = 1, SINPE_VML_COUNT = 2 } sinpe_vml;
int sinpe_vml_load(sinpe_vml lib, const char *path, char *msg, size_t msglen);
int sinpe_vml_loaded(sinpe_vml lib);
/* The library's own version string ("" when not loaded). */
const char *sinpe_vml_version(sinpe_vml lib);
/* The threading layer mkl_rt reported after the request for sequential
 * (-1 for torch's library). */
int sinpe_vml_threading_layer(sinpe_vml lib);

#ifdef __cplusplus
}
#endif
#endif
