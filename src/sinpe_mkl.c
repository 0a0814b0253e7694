/* oneMKL VML backend, loaded at run time.
 *
 * PyTorch's x86-64 wheels compute float32 exp/sin/cos of contiguous tensors
 * with oneMKL VML: vmsExp/vmsSin/vmsCos with mode
 * VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE (pytorch/pytorch,
 * aten/src/ATen/cpu/vml.h).  Calling the same functions of the same oneMKL
 * release with the same mode gives torch's bits (measured: README, Numerics).
 * The library is never linked at build time: it is opened here, from a path
 * the Python package finds in the `mkl` wheel.
 *
 * Constants from oneMKL's mkl_vml_defines.h / mkl_service.h:
 *   VML_HA 0x2, VML_ERRMODE_IGNORE 0x100, VML_FTZDAZ_OFF 0x140000,
 *   MKL_THREADING_SEQUENTIAL 1, MKL_INTERFACE_LP64 0.
 */
#include "sinpe_core.h"
#include "sinpe_mkl.h"

#include <stdio.h>
#include <string.h>

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

static struct {
    void *handle;
    vml_fn f[3]; /* exp, sin, cos */
    int threading_layer;
    char version[256];
} M;

int sinpe_mkl_loaded(void)
{
    return M.handle != NULL;
}

const char *sinpe_mkl_version(void)
{
    return M.version;
}

int sinpe_mkl_threading_layer(void)
{
    return M.threading_layer;
}

static int fail(char *msg, size_t len, const char *what, const char *detail)
{
    if (msg && len)
        snprintf(msg, len, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
    return SINPE_E_LOAD;
}

static int resolve(void *h, char *msg, size_t msglen);

int sinpe_mkl_load(const char *path, char *msg, size_t msglen)
{
    if (M.handle)
        return SINPE_OK;
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
    int st = resolve(h, msg, msglen);
    if (st != SINPE_OK) {
#ifdef _WIN32
        FreeLibrary((HMODULE)h);
#else
        dlclose(h);
#endif
    }
    return st;
}

static int resolve(void *h, char *msg, size_t msglen)
{
    static const char *names[3] = { "vmsExp", "vmsSin", "vmsCos" };
    set_layer_fn thr = (set_layer_fn)SINPE_DLSYM(h, "MKL_Set_Threading_Layer");
    set_layer_fn ifc = (set_layer_fn)SINPE_DLSYM(h, "MKL_Set_Interface_Layer");
    version_fn ver = (version_fn)SINPE_DLSYM(h, "MKL_Get_Version_String");
    vml_fn f[3];
    for (int i = 0; i < 3; i++) {
        f[i] = (vml_fn)SINPE_DLSYM(h, names[i]);
        if (!f[i])
            return fail(msg, msglen, "symbol not found", names[i]);
    }
    if (!thr || !ifc || !ver)
        return fail(msg, msglen, "not a oneMKL runtime library (mkl_rt)", NULL);
    /* Both must be set before any other MKL call; they return the layer in use. */
    if (ifc(MKL_INTERFACE_LP64) != MKL_INTERFACE_LP64)
        return fail(msg, msglen, "oneMKL is already in use with the ILP64 interface", NULL);
    int layer = thr(MKL_THREADING_SEQUENTIAL);
    char v[256] = { 0 };
    ver(v, (int)sizeof v - 1);
    /* Warm-up: one small call of each function, before any parallel use
     * (pytorch/pytorch issue 188792: a first-call dispatch race). */
    float a[64], r[64];
    for (int i = 0; i < 64; i++)
        a[i] = (float)i * 0.37f - 7.0f;
    for (int i = 0; i < 3; i++)
        f[i](64, a, r, VML_MODE_TORCH);
    memcpy(M.f, f, sizeof f);
    M.threading_layer = layer;
    memcpy(M.version, v, sizeof v);
    M.handle = h;
    return SINPE_OK;
}

int sinpe_mkl_map(int func, const float *in, float *out, size_t n)
{
    if (!M.handle)
        return SINPE_E_BACKEND;
    vml_fn f = M.f[func];
    /* VML takes an int count.  Its results do not depend on how an array is
     * cut (measured: README, Numerics), so chunking is exact. */
    const size_t chunk = (size_t)1 << 30;
    while (n > 0) {
        size_t m = n < chunk ? n : chunk;
        f((int)m, in, out, VML_MODE_TORCH);
        in += m;
        out += m;
        n -= m;
    }
    return SINPE_OK;
}
