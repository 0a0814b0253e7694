/* The one table of code paths, and the one place that probes and picks them. */
#include "paths/path.h"

#include <string.h>

extern const sinpe_path_ops sinpe_path_scalar;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
extern const sinpe_path_ops sinpe_path_avx2, sinpe_path_avx512;
#define X86_PATH(p) (&(p))
#else
#define X86_PATH(p) NULL
#endif
#if defined(__aarch64__)
extern const sinpe_path_ops sinpe_path_neon;
#define ARM_PATH(p) (&(p))
#else
#define ARM_PATH(p) NULL
#endif

/* Every path of the list (path.h: SINPE_PATH_LIST), NULL where not built; a path not built
 * here keeps its name. */
#define SINPE_PATH_NAME_(id, name) [SINPE_PATH_##id] = name,
static const char *const NAMES[SINPE_PATH_COUNT] = { SINPE_PATH_LIST(SINPE_PATH_NAME_) };
static const sinpe_path_ops *const PATHS[SINPE_PATH_COUNT] = {
    [SINPE_PATH_SCALAR] = &sinpe_path_scalar,
    [SINPE_PATH_AVX2] = X86_PATH(sinpe_path_avx2),
    [SINPE_PATH_AVX512] = X86_PATH(sinpe_path_avx512),
    [SINPE_PATH_NEON] = ARM_PATH(sinpe_path_neon),
};
#define NPATHS SINPE_PATH_COUNT

int sinpe_paths_count(void)
{
    return NPATHS;
}

const char *sinpe_paths_name(int p)
{
    return p >= 0 && p < NPATHS ? NAMES[p] : NULL;
}

const sinpe_path_ops *sinpe_paths_entry(int p)
{
    return p >= 0 && p < NPATHS ? PATHS[p] : NULL;
}

const sinpe_path_ops *sinpe_paths_get(int p)
{
    /* probed once per path; a race only repeats the same answer */
    static volatile int probed[NPATHS]; /* 0 unknown, 1 yes, 2 no */
    const sinpe_path_ops *ops = sinpe_paths_entry(p);
    if (!ops)
        return NULL;
    if (!probed[p])
        probed[p] = ops->supported() ? 1 : 2;
    return probed[p] == 1 ? ops : NULL;
}

/* A built-in path's records only (neon's are not an x86-64 build's). */
const sinpe_verification *sinpe_paths_record(int p, int k)
{
    return sinpe_paths_entry(p) ? sinpe_records_nth(p, k) : NULL;
}

/* A record of 0 wrong for sin and for cos. */
int sinpe_paths_verified(int p)
{
    int sin_ok = 0, cos_ok = 0;
    const sinpe_verification *r;
    for (int k = 0; (r = sinpe_paths_record(p, k)) != NULL; k++) {
        if (r->wrong == 0 && r->inputs > 0) {
            sin_ok |= strcmp(r->func, "sin") == 0;
            cos_ok |= strcmp(r->func, "cos") == 0;
        }
    }
    return sin_ok && cos_ok;
}

int sinpe_paths_best(void)
{
    for (int p = NPATHS - 1; p > 0; p--)
        if (sinpe_paths_get(p) && sinpe_paths_verified(p))
            return p;
    return 0;
}
