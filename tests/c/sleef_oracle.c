/* An independent oracle for the 'sleef' backend (built by tests/conftest.py with
 * -mavx2 -mfma and Debian's libsleef-dev 3.5.1): torch-on-aarch64's elementwise sin, cos
 * and exp of n floats, computed by the real SLEEF library's x86 FMA builds with torch's
 * grouping.  Sleef_*f4_*avx2128 stand in for AArch64's 4-lane AdvSIMD calls and
 * Sleef_*f8_*avx2 for SVE256's 8-lane ones (measured equal to real torch on aarch64:
 * ../shared/notes/torch-arm64.md).
 *
 * torch splits the op over its threads (at::parallel_for, grain 2048: min(threads,
 * ceil(n / 2048)) chunks of ceil(n / chunks) elements) and maps each chunk in vectors of
 * `lanes` elements, the last one zero-padded (at::vec::map). */
#include <immintrin.h>
#include <sleef.h>
#include <stdint.h>
#include <string.h>

typedef __m128 (*fn4)(__m128);
typedef __m256 (*fn8)(__m256);

static int64_t divup(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

/* func: 0 exp, 1 sin, 2 cos; u35: sin/cos of the 3.5-ULP functions (exp is always u10). */
int oracle_map(int func, int u35, int lanes, int threads, const float *in, float *out, int64_t n)
{
    fn4 f4 = func == 0 ? Sleef_expf4_u10avx2128
             : func == 1 ? (u35 ? Sleef_sinf4_u35avx2128 : Sleef_sinf4_u10avx2128)
                         : (u35 ? Sleef_cosf4_u35avx2128 : Sleef_cosf4_u10avx2128);
    fn8 f8 = func == 0 ? Sleef_expf8_u10avx2
             : func == 1 ? (u35 ? Sleef_sinf8_u35avx2 : Sleef_sinf8_u10avx2)
                         : (u35 ? Sleef_cosf8_u35avx2 : Sleef_cosf8_u10avx2);
    if (lanes != 4 && lanes != 8)
        return -1;
    int64_t chunk = n;
    if (n > 2048 && threads > 1) {
        int64_t t = divup(n, 2048) < threads ? divup(n, 2048) : threads;
        chunk = divup(n, t);
    }
    for (int64_t c0 = 0; c0 < n; c0 += chunk) {
        int64_t cend = c0 + chunk < n ? c0 + chunk : n;
        for (int64_t v = c0; v < cend; v += lanes) {
            float buf[8] = { 0 }, res[8];
            int64_t m = cend - v < lanes ? cend - v : lanes;
            memcpy(buf, in + v, (size_t)m * sizeof(float));
            if (lanes == 4)
                _mm_storeu_ps(res, f4(_mm_loadu_ps(buf)));
            else
                _mm256_storeu_ps(res, f8(_mm256_loadu_ps(buf)));
            memcpy(out + v, res, (size_t)m * sizeof(float));
        }
    }
    return 0;
}
