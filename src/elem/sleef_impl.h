/* The body of elem/sleef.c's functions, included once per instruction set (FN names
 * them): plainly, and on x86-64 once more under target("fma") so that every fmaf is one
 * instruction instead of a library call (the same bits: fma is exact either way). */
static inline float FN(fms)(float a, float b, float c)
{
    return fmaf(a, b, -c);
}

/* Float to int32, rounding to nearest even / truncating; 0 where C leaves it undefined
 * (NaN, out of range: such results are overridden or NaN anyway, descriptions section 9). */
static inline int32_t FN(cvtn)(float x)
{
    return fabsf(x) < 0x1p31f ? (int32_t)rintf(x) : 0;
}

static inline int32_t FN(cvtz)(float x)
{
    return fabsf(x) < 0x1p31f ? (int32_t)x : 0;
}

static inline int FN(expo)(float x)
{
    return (int)((bits(x) >> 23) & 255u) - 127;
}

static inline int FN(is_nan_or_inf)(float d)
{
    return (bits(d) & 0x7f800000u) == 0x7f800000u;
}

/* ---- double-float helpers (descriptions, section 3) ------------------------------------ */

static inline df FN(norm)(df p)
{
    float s = p.h + p.l;
    return (df){ s, (p.h - s) + p.l };
}

static inline df FN(twosum)(float a, float b)
{
    float s = a + b, v = s - a;
    return (df){ s, (a - (s - v)) + (b - v) };
}

static inline df FN(quick)(float a, float b)
{
    float s = a + b;
    return (df){ s, (a - s) + b };
}

static inline df FN(quick_pf)(df p, float b)
{
    float s = p.h + b;
    return (df){ s, ((p.h - s) + b) + p.l };
}

static inline df FN(twosum_pf)(df p, float b)
{
    float s = p.h + b, v = s - p.h;
    float t = (p.h - (s - v)) + (b - v);
    return (df){ s, t + p.l };
}

static inline df FN(quick_fp)(float a, df p)
{
    float s = a + p.h;
    return (df){ s, ((a - s) + p.h) + p.l };
}

static inline df FN(twosum_pp)(df p, df q)
{
    float s = p.h + q.h, v = s - p.h;
    float t = (p.h - (s - v)) + (q.h - v);
    return (df){ s, t + (p.l + q.l) };
}

static inline df FN(prod)(float a, float b)
{
    float s = a * b;
    return (df){ s, FN(fms)(a, b, s) };
}

static inline df FN(prod_pf)(df p, float b)
{
    float s = p.h * b;
    return (df){ s, fmaf(p.l, b, FN(fms)(p.h, b, s)) };
}

static inline df FN(prod_pp)(df p, df q)
{
    float s = p.h * q.h;
    return (df){ s, fmaf(p.h, q.l, fmaf(p.l, q.h, FN(fms)(p.h, q.h, s))) };
}

static inline df FN(sq)(df p)
{
    float s = p.h * p.h;
    return (df){ s, fmaf(p.h + p.h, p.l, FN(fms)(p.h, p.h, s)) };
}

static inline float FN(prod_pp1)(df p, df q)
{
    return fmaf(p.h, q.h, fmaf(p.l, q.h, p.h * q.l));
}

/* ---- the long reduction (section 6) ------------------------------------------------------ */

/* x = r + k/4 with |r| <= 1/8 (k = rint(4x) - 4 rint(x)). */
static inline float FN(qsplit)(float x, int32_t *k)
{
    float y = rintf(x * 4.0f);
    *k = FN(cvtz)(y - rintf(x) * 4.0f);
    return x - y * 0.25f;
}

/* a = r.h + r.l + k pi/2 (mod 2 pi), |r| about pi/4 at most. */
static df FN(reduce)(float a, int32_t *k)
{
    int e = FN(expo)(a) - 25;
    if (e > 65)
        a = from_bits(bits(a) - (64u << 23)); /* exact: a is normal and large */
    const uint32_t *t = REMPI[e > 0 ? e : 0];
    float t0 = from_bits(t[0]), t1 = from_bits(t[1]), t2 = from_bits(t[2]), t3 = from_bits(t[3]);
    int32_t k1, k2;
    df x = FN(prod)(a, t0);
    x.h = FN(qsplit)(x.h, &k1);
    x = FN(norm)(x);
    x = FN(twosum_pp)(x, FN(prod)(a, t1));
    x.h = FN(qsplit)(x.h, &k2);
    *k = (int32_t)((uint32_t)k1 + (uint32_t)k2);
    x = FN(norm)(x);
    x = FN(twosum_pp)(x, FN(prod_pf)((df){ t2, t3 }, a));
    x = FN(norm)(x);
    x = FN(prod_pp)(x, (df){ K.th, K.tl });
    if (fabsf(a) < K.small)
        x = (df){ a, 0.0f };
    return x;
}

/* Path C of sin (is_cos 0) and cos (1), u10 and u35 alike: d reduced to r (a double-float)
 * and the quadrant q. */
static df FN(long_path)(float d, int is_cos, int32_t *q)
{
    int32_t k;
    df r = FN(reduce)(d, &k);
    if (!is_cos) {
        *q = (2 * (k & 3) + (r.h > 0 ? 2 : 1)) >> 2;
        if (k & 1)
            r = FN(twosum_pp)(r, (df){ xorsign(K.hh, r.h), xorsign(K.hl, r.h) });
    } else {
        *q = (2 * (k & 3) + (r.h > 0 ? 8 : 7)) >> 1;
        if (!(k & 1)) {
            float g = r.h > 0 ? 0.0f : -1.0f;
            r = FN(twosum_pp)(r, (df){ xorsign(K.hh, g), xorsign(K.hl, g) });
        }
    }
    return r;
}

/* ---- u10 (sections 7, 8) ------------------------------------------------------------------ */

/* Path C's reduced argument (sin: is_cos = 0, cos: 1), normalized (NaN for an infinite or
 * NaN d), and q. */
static df FN(u10_long)(float d, int is_cos, int32_t *q)
{
    df s = FN(norm)(FN(long_path)(d, is_cos, q));
    if (FN(is_nan_or_inf)(d))
        s.h = from_bits(0xffffffffu);
    return s;
}

static float FN(u10_tail)(df s, int q_odd_or_flip, float d, int is_sin)
{
    df t = s, z = FN(sq)(s);
    float p = fmaf(K.p1, z.h, K.p2);
    p = fmaf(p, z.h, K.p3);
    df w = FN(quick)(K.p4, p * z.h);
    w = FN(prod_pp)(w, z);
    w = FN(quick_fp)(1.0f, w);
    float u = FN(prod_pp1)(t, w);
    if (q_odd_or_flip)
        u = from_bits(bits(u) ^ 0x80000000u);
    if (is_sin && bits(d) == 0x80000000u)
        return -0.0f;
    return u;
}

/* Path A of sin: d - q pi as a double-float, q = rint(d / pi). */
static df FN(sin_u10_a)(float d, int32_t *q)
{
    float u = rintf(d * K.invpi);
    *q = FN(cvtn)(u);
    float v = fmaf(u, K.c1, d);
    df s = FN(twosum)(v, u * K.c2);
    return FN(quick_pf)(s, u * K.c3);
}

static float FN(sin_u10)(float d, int path)
{
    int32_t q;
    df s = path == 0 ? FN(sin_u10_a)(d, &q) : FN(u10_long)(d, 0, &q);
    return FN(u10_tail)(s, q & 1, d, 1);
}

/* Path A of cos: d - q pi/2, q = 2 rint(d / pi - 1/2) + 1. */
static df FN(cos_u10_a)(float d, int32_t *q)
{
    float m = fmaf(rintf(fmaf(d, K.invpi, -0.5f)), 2.0f, 1.0f);
    *q = FN(cvtn)(m);
    df s = FN(twosum)(d, m * K.d1);
    s = FN(twosum_pf)(s, m * K.d2);
    return FN(twosum_pf)(s, m * K.d3);
}

static float FN(cos_u10)(float d, int path)
{
    int32_t q;
    df s = path == 0 ? FN(cos_u10_a)(d, &q) : FN(u10_long)(d, 1, &q);
    return FN(u10_tail)(s, (q & 2) == 0, d, 0);
}

/* ---- u35 (sections 7, 8 of the u35 description) ----------------------------------------- */

static float FN(u35_tail)(float x, int flip, float d, int is_sin)
{
    float s = x * x;
    if (flip)
        x = from_bits(bits(x) ^ 0x80000000u);
    float p = fmaf(K.p1, s, K.p2);
    p = fmaf(p, s, K.p3);
    p = fmaf(p, s, K.p4);
    float u = (s * (p * x)) + x;
    if (is_sin && bits(d) == 0x80000000u)
        return -0.0f;
    return u;
}

/* Path C's reduced argument (sin: is_cos = 0, cos: 1) as one float, and q. */
static float FN(u35_long)(float d, int is_cos, int32_t *q)
{
    df r = FN(long_path)(d, is_cos, q);
    float x = r.h + r.l;
    return FN(is_nan_or_inf)(d) ? from_bits(0xffffffffu) : x;
}

/* Paths A and B: d + u c1 + u c2 + u c3 (+ u c4), each step one fused multiply-add (the
 * constants are minus pi in parts, for cos halved). */
static inline float FN(cw3)(float u, float d, float c1, float c2, float c3)
{
    float x = fmaf(u, c1, d);
    x = fmaf(u, c2, x);
    return fmaf(u, c3, x);
}

static inline float FN(cw4)(float u, float d, float c1, float c2, float c3, float c4)
{
    return fmaf(u, c4, FN(cw3)(u, d, c1, c2, c3));
}

/* Paths A and B of sin: d - q pi, q = rint(d / pi). */
static float FN(sin_u35_ab)(float d, int path, int32_t *q)
{
    *q = FN(cvtn)(d * K.invpi);
    float u = (float)*q;
    return path == 0 ? FN(cw3)(u, d, K.a1, K.a2, K.a3) : FN(cw4)(u, d, K.b1, K.b2, K.b3, K.b4);
}

static float FN(sin_u35)(float d, int path)
{
    int32_t q;
    float x = path < 2 ? FN(sin_u35_ab)(d, path, &q) : FN(u35_long)(d, 0, &q);
    return FN(u35_tail)(x, q & 1, d, 1);
}

/* Paths A and B of cos: d - q pi/2, q = 2 rint(d / pi - 1/2) + 1. */
static float FN(cos_u35_ab)(float d, int path, int32_t *q)
{
    int32_t m = FN(cvtn)((d * K.invpi) - 0.5f);
    *q = 2 * m + 1;
    float u = (float)*q;
    return path == 0 ? FN(cw3)(u, d, K.a1 * 0.5f, K.a2 * 0.5f, K.a3 * 0.5f)
                     : FN(cw4)(u, d, K.b1h, K.b2h, K.b3h, K.b4h);
}

static float FN(cos_u35)(float d, int path)
{
    int32_t q;
    float x = path < 2 ? FN(cos_u35_ab)(d, path, &q) : FN(u35_long)(d, 1, &q);
    return FN(u35_tail)(x, (q & 2) == 0, d, 0);
}

/* ---- exp u10 (section 9) ------------------------------------------------------------------ */

static inline float FN(pow2i)(int32_t k)
{
    return from_bits(((uint32_t)k + 127u) << 23);
}

static float FN(expf)(float d)
{
    int32_t q = FN(cvtn)(d * K.l2e);
    float g = (float)q;
    float s = fmaf(g, K.n1, d);
    s = fmaf(g, K.n2, s);
    float p = K.q1;
    p = fmaf(p, s, K.q2);
    p = fmaf(p, s, K.q3);
    p = fmaf(p, s, K.q4);
    p = fmaf(p, s, K.q5);
    p = fmaf(p, s, K.q6);
    float u = 1.0f + fmaf(s * s, p, s);
    int32_t h = q >> 1;
    u = (u * FN(pow2i)(h)) * FN(pow2i)(q - h);
    if (d < K.xlo)
        u = 0.0f;
    if (K.xhi < d)
        u = INFINITY;
    return u;
}


static void FN(sincos)(sinpe_sleef_trig trig, int path, const float *a, float *s, float *c,
                       size_t n)
{
    for (size_t i = 0; s && i < n; i++) /* s or c NULL: not wanted */
        s[i] = trig == SINPE_SLEEF_U35 ? FN(sin_u35)(a[i], path) : FN(sin_u10)(a[i], path);
    for (size_t i = 0; c && i < n; i++)
        c[i] = trig == SINPE_SLEEF_U35 ? FN(cos_u35)(a[i], path) : FN(cos_u10)(a[i], path);
}

static void FN(exp_block)(const float *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = FN(expf)(in[i]);
}

/* ---- pow u10 (torch's Vectorized<float>::pow: Sleef_powf*_u10) ---------------------------
 * SLEEF 3.8's xpowf in its FMA build (src/libm/sleefsimdsp.c: logkf, expkf, xpowf; the
 * double-float helpers of src/common/df.h under ENABLE_FMA_SP), one lane: lanes do not
 * interact.  x86 selects how a float too large for int32 converts (x86's cvtps_epi32
 * gives INT_MIN, AArch64's vcvtq_s32_f32 saturates): only |y log x| > 2^31 sees it. */

static inline int32_t FN(rint_i32)(float x, int x86)
{
    if (x != x)
        return x86 ? INT32_MIN : 0;
    float r = rintf(x);
    if (r >= 0x1p31f)
        return x86 ? INT32_MIN : INT32_MAX;
    if (r < -0x1p31f)
        return INT32_MIN;
    return (int32_t)r;
}

/* vldexp_vf_vf_vi2: x * 2^q in five scalings, in wrapping int32 arithmetic. */
static inline float FN(ldexp5)(float x, int32_t q)
{
    uint32_t uq = (uint32_t)q;
    int32_t m = q < 0 ? -1 : 0;
    m = (int32_t)((uint32_t)(((int32_t)((uint32_t)m + uq) >> 6) - m) << 4);
    uq -= (uint32_t)m << 2;
    m = (int32_t)((uint32_t)m + 127u);
    m = m > 0 ? m : 0;
    m = m > 255 ? 255 : m;
    float u = from_bits((uint32_t)m << 23);
    x = (((x * u) * u) * u) * u;
    return x * from_bits((uq + 127u) << 23);
}

/* dfdiv_vf2_vf2_vf2, FMA form. */
static inline df FN(div_pp)(df n, df d)
{
    float t = 1.0f / d.h, s = n.h * t;
    float u = FN(fms)(t, n.h, s);
    float v = fmaf(-d.l, t, fmaf(-d.h, t, 1.0f));
    return (df){ s, fmaf(s, v, fmaf(n.l, t, u)) };
}

/* dfadd_vf2_vf2_vf2 (|p| >= |q|). */
static inline df FN(quick_pp)(df p, df q)
{
    float s = p.h + q.h;
    return (df){ s, (((p.h - s) + q.h) + p.l) + q.l };
}

/* logkf: log(d) as a double-float, d > 0 (other inputs give values xpowf overrides). */
static inline df FN(logk)(float d)
{
    int small = d < 0x1p-126f;
    if (small)
        d *= 0x1p64f;
    int32_t e = (int32_t)((bits(d * (1.0f / 0.75f)) >> 23) & 255u) - 127;
    float m = from_bits(bits(d) - ((uint32_t)e << 23));
    if (small)
        e -= 64;
    df x = FN(div_pp)(FN(twosum)(-1.0f, m), FN(twosum)(1.0f, m));
    df x2 = FN(sq)(x);
    float t = 0x1.ec2d14p-3f;            /* 0.240320354700088500976562 */
    t = fmaf(t, x2.h, 0x1.23f494p-2f);   /* 0.285112679004669189453125 */
    t = fmaf(t, x2.h, 0x1.999bb2p-2f);   /* 0.400007992982864379882812 */
    df c = { 0x1.555554p-1f, 0x1.fb6706p-29f }; /* 0.66666662693..., 3.6918386e-09 */
    df s = FN(prod_pf)((df){ 0x1.62e43p-1f, -0x1.05c61p-29f }, (float)e);
    s = FN(quick_pp)(s, (df){ x.h * 2.0f, x.l * 2.0f });
    s = FN(quick_pp)(s, FN(prod_pp)(FN(prod_pp)(x2, x), FN(twosum_pp)(FN(prod_pf)(x2, t), c)));
    return s;
}

/* expkf: exp of a double-float. */
static inline float FN(expk)(df d, int x86)
{
    int32_t q = FN(rint_i32)((d.h + d.l) * 0x1.715476p+0f, x86);
    float fq = (float)q;
    df s = FN(twosum_pf)(d, fq * -0x1.62e4p-1f);   /* L2Uf 0.693145751953125 */
    s = FN(twosum_pf)(s, fq * -0x1.7f7d1cp-20f);   /* L2Lf 1.428606765330187045e-06 */
    s = FN(norm)(s);
    float u = 0x1.655decp-10f;            /* 0.00136324646882712841033936 */
    u = fmaf(u, s.h, 0x1.1222d6p-7f);     /* 0.00836596917361021041870117 */
    u = fmaf(u, s.h, 0x1.555e98p-5f);     /* 0.0416710823774337768554688 */
    u = fmaf(u, s.h, 0x1.5554bcp-3f);     /* 0.166665524244308471679688 */
    u = fmaf(u, s.h, 0x1.fffff6p-2f);     /* 0.499999850988388061523438 */
    df t = FN(quick_pp)(s, FN(prod_pf)(FN(sq)(s), u));
    t = FN(quick_fp)(1.0f, t);
    float r = FN(ldexp5)(t.h + t.l, q);
    return d.h < -104.0f ? 0.0f : r;
}

static float FN(powf)(float x, float y, int x86)
{
    float ay = fabsf(y);
    int yisint = truncf(y) == y || ay > 0x1p24f;
    int yisodd = ay < 0x1p24f && yisint && (((int32_t)y & 1) == 1);
    float r = FN(expk)(FN(prod_pf)(FN(logk)(fabsf(x)), y), x86);
    if (r != r)
        r = INFINITY;
    r *= x > 0.0f ? 1.0f : yisint ? (yisodd ? -1.0f : 1.0f) : NAN;
    if (isinf(y)) {
        float efx = from_bits(bits(fabsf(x) - 1.0f) ^ (bits(y) & 0x80000000u));
        r = efx < 0.0f ? 0.0f : efx == 0.0f ? 1.0f : INFINITY;
    }
    if (isinf(x) || x == 0.0f) {
        int neg_y = (bits(y) >> 31) != 0;
        float m = neg_y != (x == 0.0f) ? 0.0f : INFINITY;
        r = from_bits(bits(m) ^ (bits(yisodd ? x : 1.0f) & 0x80000000u));
    }
    if (x != x || y != y)
        r = from_bits(0xffffffffu);
    if (y == 0.0f || x == 1.0f)
        r = 1.0f;
    return r;
}
