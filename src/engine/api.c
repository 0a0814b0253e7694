/* The public face of the registries (backends, code paths, the CPU probe) and the
 * conveniences for C callers (sinpe.h). */
#include "engine/engine.h"

#include <string.h>

#include "platform/cpu.h"
#include "platform/threads.h"

/* ---- backends ---------------------------------------------------------------------------- */

int sinpe_backend_count(void)
{
    return sinpe_backends_count();
}

const char *sinpe_backend_name(int backend)
{
    return sinpe_backends_name(backend);
}

int sinpe_backend_find(const char *name)
{
    for (int b = 0; name && b < sinpe_backends_count(); b++)
        if (strcmp(sinpe_backends_name(b), name) == 0)
            return b;
    return -1;
}

int sinpe_backend_load(int backend, const char *path, char *msg, size_t msglen)
{
    const sinpe_backend_ops *be = sinpe_backends_get(backend);
    if (msg && msglen)
        msg[0] = 0;
    if (!be || !be->load) {
        if (msg && msglen)
            strncpy(msg, be ? "this backend has no library to load" : "unknown backend", msglen - 1);
        return SINPE_E_LOAD;
    }
    if (!path) {
        if (msg && msglen)
            strncpy(msg, "no library path", msglen - 1);
        return SINPE_E_LOAD;
    }
    return be->load(path, msg, msglen) == 0 ? SINPE_OK : SINPE_E_LOAD;
}

int sinpe_backend_ready(int backend)
{
    const sinpe_backend_ops *be = sinpe_backends_get(backend);
    return be && be->ready();
}

int sinpe_backend_loadable(int backend)
{
    const sinpe_backend_ops *be = sinpe_backends_get(backend);
    return be && be->load;
}

int sinpe_backend_independent(int backend)
{
    const sinpe_backend_ops *be = sinpe_backends_get(backend);
    return be && be->independent;
}

const char *sinpe_backend_version(int backend)
{
    const sinpe_backend_ops *be = sinpe_backends_get(backend);
    return be && be->version ? be->version() : "";
}

int sinpe_backend_threading_layer(int backend)
{
    const sinpe_backend_ops *be = sinpe_backends_get(backend);
    return be && be->threading_layer ? be->threading_layer() : -1;
}

/* ---- code paths and the CPU ------------------------------------------------------------ */

int sinpe_path_count(void)
{
    return sinpe_paths_count();
}

const char *sinpe_path_name(int path)
{
    return sinpe_paths_name(path);
}

int sinpe_path_available(int path)
{
    return sinpe_paths_get(path) != NULL;
}

int sinpe_path_verified(int path)
{
    return sinpe_paths_verified(path);
}

int sinpe_path_best(void)
{
    return sinpe_paths_best();
}

int sinpe_path_record(int path, int k, sinpe_record *out)
{
    const sinpe_verification *r = sinpe_paths_record(path, k);
    if (!r || !out)
        return 0;
    out->func = r->func;
    out->cpu = r->cpu;
    out->date = r->date;
    out->command = r->command;
    out->inputs = r->inputs;
    out->wrong = r->wrong;
    out->seconds = r->seconds;
    return 1;
}

const char *sinpe_cpu_vendor(void)
{
    return sinpe_cpu()->vendor;
}

const char *sinpe_cpu_feature(int k, int *value)
{
    const sinpe_cpu_info *c = sinpe_cpu();
    const struct { const char *name; int v; } f[] = {
        { "fma", c->fma }, { "avx2", c->avx2 }, { "avx512f", c->avx512f },
        { "avx512dq", c->avx512dq }, { "avx512bw", c->avx512bw }, { "avx512vl", c->avx512vl },
        { "f16c", c->f16c }, { "neon", c->neon },
    };
    if (k < 0 || k >= (int)(sizeof f / sizeof f[0]))
        return NULL;
    if (value)
        *value = f[k].v;
    return f[k].name;
}

/* ---- threads ------------------------------------------------------------------------------ */

int sinpe_set_thread_runtime(const char *openmp_library)
{
    return sinpe_threads_adopt_openmp(openmp_library) == 0 ? SINPE_OK : SINPE_E_RUNTIME;
}

int sinpe_thread_runtime(void)
{
    return sinpe_threads_openmp();
}

/* ---- conveniences ---------------------------------------------------------------------- */

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
    j.kind = SINPE_JOB_ADD;
    j.dst.strides[0] = (int64_t)batch_stride * 4;
    j.dst.strides[1] = (int64_t)row_stride * 4;
    j.offset = offset;
    return sinpe_run(&j, o);
}

int sinpe_map(sinpe_func func, const float *in, float *out, int64_t n, const sinpe_opts *o)
{
    sinpe_job j;
    int64_t shape[1] = { n };
    sinpe_job_init(&j, out, 1, shape, 0.0);
    j.kind = SINPE_JOB_MAP;
    j.func = func;
    j.src = j.dst;
    j.src.data = (void *)(uintptr_t)in;
    return sinpe_run(&j, o);
}
