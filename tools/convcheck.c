/* Exhaustive check of the vector paths' element conversions against the scalar path's
 * (src/paths/path.h: half, rope_half; the rules of src/elem/half.h).
 *
 *   make -C tools convcheck && tools/convcheck
 *
 * For every code path this CPU runs, bit patterns compared with the scalar functions:
 *   store: every float32 pattern (2^32) rounded to float16 and to bfloat16;
 *   add:   every float16 / bfloat16 pattern x (2^16) plus 2^16 float32 values each (all
 *          2^16 bfloat16-exact floats shifted by a pattern in the low bits: 2^32 sums);
 *   rope:  2^24 vectors of 40 pairs (float32, float16, bfloat16) from random bit patterns,
 *          specials included, tables from random floats in [-1, 1] and specials.
 * Prints counts and seconds per check; exit status 0 when nothing differs.  No library
 * beyond libc (it runs on the base image).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elem/half.h"
#include "paths/path.h"

#define BLOCK 4096

static int show; /* -v: the first mismatches of each check are printed */

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static float f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint64_t check_store(const sinpe_path_ops *p, int kind)
{
    static float pe[BLOCK];
    static uint16_t a[BLOCK], b[BLOCK];
    uint64_t bad = 0;
    for (uint64_t u0 = 0; u0 < (1ull << 32); u0 += BLOCK) {
        for (int i = 0; i < BLOCK; i++)
            pe[i] = f32((uint32_t)(u0 + (uint64_t)i));
        p->half(a, pe, BLOCK, kind, 0);
        sinpe_half_scalar(b, pe, BLOCK, kind, 0);
        for (int i = 0; i < BLOCK; i++)
            if (a[i] != b[i] && bad++ < (uint64_t)show)
                printf("  store %08x: path %04x scalar %04x\n", (unsigned)(u0 + i), a[i], b[i]);
    }
    return bad;
}

static uint64_t check_add(const sinpe_path_ops *p, int kind)
{
    static float pe[BLOCK];
    static uint16_t a[BLOCK], b[BLOCK];
    uint64_t bad = 0;
    for (uint32_t x = 0; x < 65536; x++) {
        for (uint32_t v0 = 0; v0 < 65536; v0 += BLOCK) {
            for (int i = 0; i < BLOCK; i++) {
                a[i] = b[i] = (uint16_t)x;
                pe[i] = f32(((v0 + (uint32_t)i) << 16) | (x * 2654435761u >> 16));
            }
            p->half(a, pe, BLOCK, kind, 1);
            sinpe_half_scalar(b, pe, BLOCK, kind, 1);
            for (int i = 0; i < BLOCK; i++)
                if (a[i] != b[i] && bad++ < (uint64_t)show) {
                    uint32_t u;
                    memcpy(&u, pe + i, 4);
                    printf("  add %04x + %08x: path %04x scalar %04x\n", x, u, a[i], b[i]);
                }
        }
    }
    return bad;
}

static float table_value(void)
{
    static const uint32_t special[] = { 0x7fc00000u, 0xff800000u, 0x7f800000u, 0x80000000u,
                                        0x00000001u, 0x3f800000u, 0xbf800000u };
    uint32_t r = next32();
    if (r % 64 == 0)
        return f32(special[r / 64 % 7]);
    return (float)((int32_t)next32()) * 0x1p-31f;
}

static uint64_t check_rope(const sinpe_path_ops *p, int kind, uint64_t vectors)
{
    enum { H = 40 };
    float c[2 * H], s[2 * H];
    unsigned char x[2 * H * 4], y[2 * H * 4], xin[2 * H * 4];
    size_t w = kind == SINPE_HALF_F32 ? 4 : 2;
    uint64_t bad = 0;
    for (uint64_t v = 0; v < vectors; v++) {
        for (int i = 0; i < 2 * H; i++) {
            c[i] = table_value();
            s[i] = table_value();
            uint32_t r = next32();
            memcpy(x + i * w, &r, w);
        }
        memcpy(y, x, sizeof x);
        memcpy(xin, x, sizeof x);
        p->rope_half(x, c, s, H, kind, SINPE_HALF_F32);
        sinpe_rope_half_scalar(y, c, s, H, kind, SINPE_HALF_F32);
        if (memcmp(x, y, 2 * H * w) != 0 && bad++ < (uint64_t)show)
            for (int i = 0; i < 2 * H; i++)
                if (memcmp(x + i * w, y + i * w, w)) {
                    uint32_t px = 0, py = 0, in = 0;
                    memcpy(&px, x + i * w, w);
                    memcpy(&py, y + i * w, w);
                    memcpy(&in, xin + i * w, w);
                    uint32_t ic, is, jc, js;
                    int j = i < H ? i + H : i - H;
                    memcpy(&ic, c + i, 4);
                    memcpy(&is, s + i, 4);
                    memcpy(&jc, xin + j * w, 4);
                    (void)js;
                    printf("  rope lane %d: x %08x partner %08x c %08x s %08x: path %08x scalar "
                           "%08x\n", i, in, w == 4 ? jc : jc & 0xffffu, ic, is, px, py);
                    break;
                }
    }
    return bad;
}

/* Tables of the kind's own values (rope_half's tkind == kind: read as they are): the path
 * against the scalar path reading them so, and against the scalar path given the same
 * tables widened to float32 (rounded again there: the identity). */
static uint64_t check_rope_typed(const sinpe_path_ops *p, int kind, uint64_t vectors)
{
    enum { H = 40 };
    uint16_t c16[2 * H], s16[2 * H];
    float c[2 * H], s[2 * H];
    uint16_t x[2 * H], y[2 * H], z[2 * H];
    uint64_t bad = 0;
    for (uint64_t v = 0; v < vectors; v++) {
        for (int i = 0; i < 2 * H; i++) {
            uint32_t r = next32();
            c16[i] = (uint16_t)r;
            s16[i] = (uint16_t)(r >> 16);
            x[i] = (uint16_t)next32();
            c[i] = kind == SINPE_HALF_F16 ? sinpe_f16_to_f32(c16[i]) : sinpe_bf16_to_f32(c16[i]);
            s[i] = kind == SINPE_HALF_F16 ? sinpe_f16_to_f32(s16[i]) : sinpe_bf16_to_f32(s16[i]);
        }
        memcpy(y, x, sizeof x);
        memcpy(z, x, sizeof x);
        p->rope_half(x, c16, s16, H, kind, kind);
        sinpe_rope_half_scalar(y, c16, s16, H, kind, kind);
        sinpe_rope_half_scalar(z, c, s, H, kind, SINPE_HALF_F32);
        if ((memcmp(x, y, sizeof x) || memcmp(x, z, sizeof x)) && bad++ < (uint64_t)show)
            for (int i = 0; i < 2 * H; i++)
                if (x[i] != y[i] || x[i] != z[i]) {
                    printf("  rope (typed tables) lane %d: c %04x s %04x: path %04x scalar "
                           "%04x widened %04x\n", i, c16[i], s16[i], x[i], y[i], z[i]);
                    break;
                }
    }
    return bad;
}

int main(int argc, char **argv)
{
    show = argc > 1 && !strcmp(argv[1], "-v") ? 5 : 0;
    static const char *kinds[] = { "float32", "float16", "bfloat16" };
    uint64_t total = 0;
    for (int k = 1; k < sinpe_paths_count(); k++) {
        const sinpe_path_ops *p = sinpe_paths_get(k);
        const char *name = sinpe_paths_name(k);
        if (!p)
            continue;
        for (int kind = SINPE_HALF_F16; kind <= SINPE_HALF_BF16; kind++) {
            double t0 = now();
            uint64_t b = check_store(p, kind);
            printf("%s store %s: 2^32 float32 patterns, %llu differ (%.1f s)\n", name,
                   kinds[kind], (unsigned long long)b, now() - t0);
            total += b;
            t0 = now();
            b = check_add(p, kind);
            printf("%s add %s: 2^32 sums, %llu differ (%.1f s)\n", name, kinds[kind],
                   (unsigned long long)b, now() - t0);
            total += b;
        }
        for (int kind = SINPE_HALF_F32; kind <= SINPE_HALF_BF16; kind++) {
            double t0 = now();
            uint64_t b = check_rope(p, kind, 1u << 24);
            printf("%s rope_half %s: 2^24 vectors of 40 pairs, %llu differ (%.1f s)\n", name,
                   kinds[kind], (unsigned long long)b, now() - t0);
            total += b;
            if (kind == SINPE_HALF_F32)
                continue;
            t0 = now();
            b = check_rope_typed(p, kind, 1u << 22);
            printf("%s rope_half %s, tables of the kind: 2^22 vectors of 40 pairs, %llu differ "
                   "(%.1f s)\n", name, kinds[kind], (unsigned long long)b, now() - t0);
            total += b;
        }
    }
    printf("convcheck: %s\n", total ? "DIFFERENCES" : "every path equals the scalar one");
    return total != 0;
}
