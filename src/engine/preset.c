/* Compiling a preset table's description (sinpe_preset.h). */
#include "engine/preset.h"

#include <stdlib.h>
#include <string.h>

void sinpe_preset_prog_free(sinpe_preset_prog *pr)
{
    free(pr->mem);
    memset(pr, 0, sizeof *pr);
}

/* The index of angle t among the computed ones: map[t]; fills freq/comp of the distinct
 * ones.  Angles are equal when frequency bits and component are.  The presets' repeats are
 * of the previous angle (pairs) or of the angle half a row back (cat(freqs, freqs)): those
 * two are looked at, in O(1) per angle; any other repeat is computed twice. */
static int same_angle(const float *freq, const int32_t *comp, int64_t k, float f, int32_t q)
{
    return memcmp(&freq[k], &f, sizeof f) == 0 && comp[k] == q;
}

static int64_t dedup_angles(const sinpe_preset *sp, int64_t *map, float *freq, int32_t *comp)
{
    int64_t K = 0, T = sp->nang, h = T / 2;
    for (int64_t t = 0; t < T; t++) {
        float f = sp->freq[t];
        int32_t q = sp->comp ? sp->comp[t] : 0;
        int64_t k = -1;
        if (K > 0 && same_angle(freq, comp, K - 1, f, q))
            k = K - 1;
        else if (t >= h && h > 0 && T % 2 == 0 && same_angle(freq, comp, map[t - h], f, q))
            k = map[t - h];
        if (k < 0) {
            freq[K] = f;
            comp[K] = q;
            k = K++;
        }
        map[t] = k;
    }
    return K;
}

int sinpe_preset_compile(const sinpe_preset *sp, int64_t ncols, int dedup, sinpe_preset_prog *pr)
{
    memset(pr, 0, sizeof *pr);
    int64_t T = sp->nang;
    dedup = dedup && sp->freq && T > 1;
    size_t bytes = (size_t)ncols * sizeof(sinpe_colrun) + (size_t)T * sizeof(int64_t)
                   + (dedup ? (size_t)T * (sizeof(float) + sizeof(int32_t)) : 0);
    char *m = malloc(bytes > 0 ? bytes : 1);
    if (!m)
        return SINPE_E_NOMEM;
    pr->mem = m;
    pr->runs = (sinpe_colrun *)(void *)m;
    int64_t *map = (int64_t *)(void *)(m + (size_t)ncols * sizeof(sinpe_colrun));
    if (dedup) {
        float *freq = (float *)(void *)(map + T);
        int32_t *comp = (int32_t *)(void *)(freq + T);
        pr->K = dedup_angles(sp, map, freq, comp);
        pr->freq = freq;
        pr->comp = comp;
    } else {
        pr->K = T;
        for (int64_t t = 0; t < T; t++)
            map[t] = t;
        pr->freq = sp->freq;
        pr->freq64 = sp->freq64;
        pr->comp = sp->comp;
    }
    /* runs: interleaved (sin t, cos t, sin t+1, ...), copies of consecutive angles, zeros */
    int64_t n = 0;
    for (int64_t k = 0; k < ncols;) {
        int kind = (int)(sp->col[k] & 3);
        int64_t src = map[sp->col[k] >> 2], len = 1;
        if (kind == SINPE_COL_SIN && k + 1 < ncols && sp->col[k + 1] == sp->col[k] + 1) {
            while (k + 2 * len + 1 < ncols && sp->col[k + 2 * len] == sp->col[k] + 4 * len
                   && sp->col[k + 2 * len + 1] == sp->col[k] + 4 * len + 1
                   && map[sp->col[k + 2 * len] >> 2] == src + len)
                len++;
            pr->runs[n++] = (sinpe_colrun){ SINPE_RUN_PAIRS, 0, src, len };
            pr->need_s = pr->need_c = 1;
            k += 2 * len;
            continue;
        }
        if (kind != SINPE_COL_ZERO && k + 1 < ncols && sp->col[k + 1] == sp->col[k]) {
            /* each value twice: rotary-embedding-torch's repeated angles */
            while (k + 2 * len + 1 < ncols && sp->col[k + 2 * len] == sp->col[k] + 4 * len
                   && sp->col[k + 2 * len + 1] == sp->col[k + 2 * len]
                   && map[sp->col[k + 2 * len] >> 2] == src + len)
                len++;
            pr->runs[n++] = (sinpe_colrun){ SINPE_RUN_TWICE, kind, src, len };
            pr->need_s |= kind == SINPE_COL_SIN;
            pr->need_c |= kind == SINPE_COL_COS;
            k += 2 * len;
            continue;
        }
        while (k + len < ncols && (sp->col[k + len] & 3) == kind
               && (kind == SINPE_COL_ZERO || map[sp->col[k + len] >> 2] == src + len))
            len++;
        pr->runs[n++] = (sinpe_colrun){ kind, kind, src, len };
        pr->need_s |= kind == SINPE_COL_SIN;
        pr->need_c |= kind == SINPE_COL_COS;
        k += len;
    }
    pr->nruns = n;
    return SINPE_OK;
}

void sinpe_preset_gather(const sinpe_preset_prog *pr, const sinpe_path_ops *path, float *dst,
                       const float *a, const float *s, const float *c)
{
    for (int64_t r = 0; r < pr->nruns; r++) {
        const sinpe_colrun *u = &pr->runs[r];
        const float *v = (u->kind == SINPE_RUN_SIN ? s : u->kind == SINPE_RUN_COS ? c : a) + u->src;
        switch (u->op) {
        case SINPE_RUN_PAIRS:
            path->interleave(s + u->src, c + u->src, dst, (size_t)u->len);
            dst += 2 * u->len;
            continue;
        case SINPE_RUN_TWICE:
            for (int64_t i = 0; i < u->len; i++)
                dst[2 * i] = dst[2 * i + 1] = v[i];
            dst += 2 * u->len;
            continue;
        case SINPE_RUN_ZERO:
            memset(dst, 0, (size_t)u->len * sizeof(float));
            break;
        default:
            if (u->len == 1)
                dst[0] = v[0];
            else
                memcpy(dst, v, (size_t)u->len * sizeof(float));
            break;
        }
        dst += u->len;
    }
}
