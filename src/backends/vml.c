/* oneMKL VML backends ('mkl' and 'torch'), loaded at run time.
 *
 * PyTorch's x86-64 wheels compute float32 exp/sin/cos of contiguous tensors
 * with oneMKL VML: vmsExp/vmsSin/vmsCos with mode
 * VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (pytorch/pytorch,
 * aten/src/ATen/cpu/vml.h).  Calling the same functions of the same oneMKL
 * release with the same mode gives torch's bits (measured: docs/backends.md).
 * Two libraries provide them: the `mkl` wheel's mkl_rt ('mkl'), and the
 * installed torch's own libtorch_cpu, which links oneMKL statically and
 * exports the VML functions and MKL_Get_Version_String ('torch'; every
 * x86-64 wheel from 1.13 to 2.15: docs/backends.md).
 * Neither is linked at build time: both are opened here, from paths the
 * Python package finds.  pow is torch's x86-64 float32 pow (elem/powf.h).
 *
 * Constants from oneMKL's mkl_vml_defines.h / mkl_service.h:
 *   VML_HA 0x2, VML_ERRMODE_IGNORE 0x100, VML_FTZDAZ_OFF 0x140000,
 *   MKL_THREADING_SEQUENTIAL 1, MKL_INTERFACE_LP64 0.
 */
#include "backends/backend.h"

#include <stdio.h>
#include <string.h>

#include "elem/powf.h"

#ifdef _WIN32
#include <windows.h>
#define SINPE_DLOPEN(p) ((void *)LoadLibraryA(p))
#define SINPE_DLSYM(h, s) ((void *)GetProcAddress((HMODULE)(h), (s)))
#else
#include <dlfcn.h>
#define SINPE_DLOPEN(p) dlopen((p), RTLD_NOW | RTLD_LOCAL)
#define SINPE_DLSYM(h, s) dlsym((h), (s))
#endif

#define VML_MODE_TORCH 0x00140102LL
#define MKL_THREADING_SEQUENTIAL 1
#define MKL_INTERFACE_LP64 0

typedef void (*vml_fn)(int n, const float *a, float *r, long long mode);
typedef int (*set_layer_fn)(int);
typedef void (*version_fn)(char *buf, int len);

enum { LIB_MKL = 0, LIB_TORCH = 1, NLIBS = 2 };
enum { F_EXP = 0, F_SIN = 1, F_COS = 2 };

/* One entry per library: the mkl wheel's mkl_rt, and torch's libtorch_cpu
 * (which links oneMKL statically and exports the same VML functions).  Written once, by
 * the load (the caller serializes loads), before the handle that marks it ready. */
static struct {
    void *handle;
    vml_fn f[3]; /* exp, sin, cos */
    set_layer_fn local_threads; /* MKL_Set_Num_Threads_Local, or NULL */
    int threading_layer;
    char version[256];
} M[NLIBS];

static int fail(char *msg, size_t len, const char *what, const char *detail)
{
    if (msg && len)
        snprintf(msg, len, "cannot load oneMKL: %s%s%s", what, detail ? ": " : "",
                 detail ? detail : "");
    return -1;
}

static int resolve(int lib, void *h, char *msg, size_t msglen);

static int vml_load(int lib, const char *path, char *msg, size_t msglen)
{
    if (M[lib].handle)
        return 0;
    if (!path)
        return fail(msg, msglen, "no library path", NULL);
    void *h = SINPE_DLOPEN(path);
    if (!h) {
#ifdef _WIN32
        return fail(msg, msglen, "LoadLibrary failed", path);
#else
        return fail(msg, msglen, "dlopen failed", dlerror());
#endif
    }
    int st = resolve(lib, h, msg, msglen);
    if (st != 0) {
#ifdef _WIN32
        FreeLibrary((HMODULE)h);
#else
        dlclose(h);
#endif
    }
    return st;
}

static int resolve(int lib, void *h, char *msg, size_t msglen)
{
    static const char *names[3] = { "vmsExp", "vmsSin", "vmsCos" };
    version_fn ver = (version_fn)SINPE_DLSYM(h, "MKL_Get_Version_String");
    vml_fn f[3];
    for (int i = 0; i < 3; i++) {
        f[i] = (vml_fn)SINPE_DLSYM(h, names[i]);
        if (!f[i])
            return fail(msg, msglen, "symbol not found", names[i]);
    }
    if (!ver)
        return fail(msg, msglen, "not a oneMKL library (no MKL_Get_Version_String)", NULL);
    int layer = -1;
    if (lib == LIB_MKL) {
        /* mkl_rt: both layers must be set before any other MKL call; they
         * return the layer in use.  torch's static copy is left as torch
         * configures it. */
        set_layer_fn thr = (set_layer_fn)SINPE_DLSYM(h, "MKL_Set_Threading_Layer");
        set_layer_fn ifc = (set_layer_fn)SINPE_DLSYM(h, "MKL_Set_Interface_Layer");
        if (!thr || !ifc)
            return fail(msg, msglen, "not a oneMKL runtime library (mkl_rt)", NULL);
        if (ifc(MKL_INTERFACE_LP64) != MKL_INTERFACE_LP64)
            return fail(msg, msglen, "oneMKL is already in use with the ILP64 interface", NULL);
        layer = thr(MKL_THREADING_SEQUENTIAL);
    }
    char v[256] = { 0 };
    ver(v, (int)sizeof v - 1);
    /* Warm-up: one small call of each function, before any parallel use
     * (pytorch/pytorch issue 188792: a first-call dispatch race). */
    set_layer_fn local = (set_layer_fn)SINPE_DLSYM(h, "MKL_Set_Num_Threads_Local");
    int old = local ? local(1) : 0;
    float a[64], r[64];
    for (int i = 0; i < 64; i++)
        a[i] = (float)i * 0.37f - 7.0f;
    for (int i = 0; i < 3; i++)
        f[i](64, a, r, VML_MODE_TORCH);
    if (local)
        local(old);
    memcpy(M[lib].f, f, sizeof f);
    M[lib].local_threads = (set_layer_fn)SINPE_DLSYM(h, "MKL_Set_Num_Threads_Local");
    M[lib].threading_layer = layer;
    memcpy(M[lib].version, v, sizeof v);
    M[lib].handle = h;
    return 0;
}

/* f of n floats with the library (loaded: the engine checks readiness first). */
static void vml_map(int lib, int func, const float *in, float *out, size_t n)
{
    vml_fn f = M[lib].f[func];
    /* torch's static oneMKL threads VML calls with OpenMP (its VML threader
     * enters a GNU OpenMP team even for 2048 values), which hangs in a
     * forked child of a process whose OpenMP pool was running and competes
     * with sinpe's own threads: this calling thread asks for one MKL thread,
     * and restores its previous setting (0 = the global one) afterwards, so
     * torch's own MKL work in this thread is unchanged. */
    int old = M[lib].local_threads ? M[lib].local_threads(1) : 0;
    /* VML takes an int count.  Its results do not depend on how an array is
     * cut (measured: docs/backends.md), so chunking is exact. */
    const size_t chunk = (size_t)1 << 30;
    while (n > 0) {
        size_t m = n < chunk ? n : chunk;
        f((int)m, in, out, VML_MODE_TORCH);
        in += m;
        out += m;
        n -= m;
    }
    if (M[lib].local_threads)
        M[lib].local_threads(old);
}

static int vml_check(const sinpe_bctx *ctx)
{
    return ctx->path ? 0 : 1;
}

/* torch.pow on x86-64: SLEEF's powf for its vectors, this process's powf for the rest. */
static void vml_pow(const sinpe_bctx *ctx, float base, const float *y, float *out, int64_t e0,
                    int64_t n)
{
    sinpe_pow_profile prof = { ctx->pow_lanes, 1, sinpe_glibc_powf_fused(), 1, 1 };
    sinpe_torch_powf(base, y, out, e0, n, ctx->tensor_len, &prof);
}

/* The two libraries' operations, from one body. */
#define VML_BACKEND(NAME, LIB)                                                               \
    static int NAME##_load(const char *path, char *msg, size_t msglen)                       \
    {                                                                                        \
        return vml_load(LIB, path, msg, msglen);                                             \
    }                                                                                        \
    static int NAME##_ready(void) { return M[LIB].handle != NULL; }                          \
    static const char *NAME##_version(void) { return M[LIB].handle ? M[LIB].version : ""; }  \
    static int NAME##_layer(void) { return M[LIB].handle ? M[LIB].threading_layer : -1; }   \
    static void NAME##_exp(const sinpe_bctx *ctx, int64_t e0, const float *in, float *out,   \
                           size_t n)                                                         \
    {                                                                                        \
        (void)ctx;                                                                           \
        (void)e0;                                                                            \
        vml_map(LIB, F_EXP, in, out, n);                                                     \
    }                                                                                        \
    static void NAME##_sincos(const sinpe_bctx *ctx, int64_t e0, const float *a, float *s,   \
                              float *c, size_t n)                                            \
    {                                                                                        \
        (void)ctx;                                                                           \
        (void)e0;                                                                            \
        if (s)                                                                               \
            vml_map(LIB, F_SIN, a, s, n);                                                    \
        if (c)                                                                               \
            vml_map(LIB, F_COS, a, c, n);                                                    \
    }                                                                                        \
    const sinpe_backend_ops sinpe_backend_##NAME = {                                         \
        .independent = 1,                                                                    \
        .load = NAME##_load,                                                                 \
        .ready = NAME##_ready,                                                               \
        .version = NAME##_version,                                                           \
        .threading_layer = NAME##_layer,                                                     \
        .check = vml_check,                                                                  \
        .exp = NAME##_exp,                                                                   \
        .sincos = NAME##_sincos,                                                             \
        .pow = vml_pow,                                                                      \
    };

VML_BACKEND(mkl, LIB_MKL)
VML_BACKEND(torch, LIB_TORCH)
