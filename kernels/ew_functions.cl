/* Functions the generated elementwise kernels share. lib/ops/ew_source.c puts this text, after
 * `#pragma OPENCL FP_CONTRACT OFF` (and, where the device has fp64, CLRUN_HAVE_FP64 and its
 * extension), in front of every program it generates, unfused and fused alike; it defines no
 * kernel. Integer arithmetic that could overflow goes through unsigned types, which wrap. */
#pragma OPENCL FP_CONTRACT OFF

/* Inlined where the compiler takes the hint (clang: POCL, oclgrind): a call left in a kernel
 * stops POCL from vectorizing the loop over its work-items, and a function holding an exp
 * (erfc, gelu_erf) is too large for the inliner's own choice once a program has several
 * kernels calling it. The element functions the generator writes carry it too. */
#ifdef __clang__
#define CLRUN_INLINE __attribute__((always_inline))
#else
#define CLRUN_INLINE
#endif

/* A work-group wholly inside [0, n) skips the per-element check: without a branch per element,
 * CPU compilers (POCL) vectorize the loop over its work-items. Only the last group checks. */
#define WHOLE_GROUP(n) ((get_group_id(0) + 1) * get_local_size(0) <= (n))

/* Every float an elementwise kernel stores goes through these: a NaN is stored as IEEE's default
 * quiet NaN (0x7fc00000, 0x7ff8000000000000: what C's NAN is on common hosts; OpenCL's NAN macro
 * may have another payload), whatever sign and payload the operations gave it. IEEE 754 leaves those
 * to the implementation, and a compiler may pick differently in a fused kernel than in the
 * unfused ones (x86's invalid operations make a negative NaN, library code a positive one), so
 * without this a NaN could differ in its bits between the two. Which values are NaN never
 * depends on a NaN's bits, so with it every stored result is the same. */
float clrun_canon_f32(const float v) { return isnan(v) ? as_float(0x7fc00000u) : v; }
/* An f16 result stored (OpenCL 1.2's vstore_half: no cl_khr_fp16 needed), rounded once to nearest
 * even, a NaN as f16's default quiet NaN 0x7e00 for the reason above. */
CLRUN_INLINE void clrun_store_f16(const float v, const size_t i, __global half *p)
{
    if (isnan(v))
        ((__global ushort *)p)[i] = (ushort)0x7e00;
    else
        vstore_half_rte(v, i, p);
}
#ifdef CLRUN_HAVE_FP64
CLRUN_INLINE void clrun_store_f16_f64(const double v, const size_t i, __global half *p)
{
    if (isnan(v))
        ((__global ushort *)p)[i] = (ushort)0x7e00;
    else
        vstore_half_rte(v, i, p);
}
#endif
/* bfloat16, f32's top half: widened exactly; narrowed rounding to nearest even, a NaN stored as
 * the default quiet NaN 0x7fc0 (f32's 0x7fc00000 above; graph/types.c's clrun__f32_to_bf16 gives
 * the same bits). */
CLRUN_INLINE float clrun_bf16_to_f32(const ushort b) { return as_float((uint)b << 16); }
CLRUN_INLINE ushort clrun_f32_to_bf16(const float v)
{
    const uint bits = as_uint(v);
    if (isnan(v))
        return (ushort)0x7fc0u;
    const uint rest = bits & 0xFFFFu, top = bits >> 16;
    return (ushort)(top + (rest > 0x8000u || (rest == 0x8000u && (top & 1u))));
}
/* f, a value rounded toward zero, rounded to odd instead (its last bit set when inexact):
 * rounding that float once more to bf16 is then the value's own rounding. */
CLRUN_INLINE float clrun_f32_odd(const float f, const bool inexact)
{
    return inexact ? as_float(as_uint(f) | 1u) : f;
}
#ifdef CLRUN_HAVE_FP64
CLRUN_INLINE float clrun_f64_to_f32_odd(const double v)
{
    const float f = convert_float_rtz(v);
    return clrun_f32_odd(f, !isnan(v) && (double)f != v);
}
#endif
#ifdef CLRUN_HAVE_FP64
double clrun_canon_f64(const double v) { return isnan(v) ? as_double(0x7ff8000000000000ul) : v; }
#endif

/* ---- exp and tanh in float ---------------------------------------------------------------
 * exp(x) = 2^n e^r, n the integer nearest x / ln 2 and r = x - n ln 2 (Cody-Waite: ln 2 in two
 * parts, the first product exact, so r is exact but for the second part's rounding), |r| <=
 * ln2/2 (a hair more: n comes from a rounded product). e^r = 1 + r + r^2 q(r), q of degree 4 a
 * fit made for clrun (Lawson's weighted least squares toward the minimax of e^r's relative error:
 * 5.2e-9 with float coefficients, so the result's error is its roundings: at most 1.035 ulp
 * over every third float, measured against the double exp). n is rounded by adding 1.5 * 2^23
 * (the sum's low bits are then n), and 2^n is built from exponent bits in two factors, 2^h and
 * 2^(n - h), h = floor(n / 2), both normal for n in [-150, 128]: p 2^h is exact, and the one
 * rounding of the second product makes overflow +inf and a result below 2^-126 the denormal IEEE
 * rounds to (no flush; a device that flushes denormals flushes it there), x below -104 0.
 * Clamping x to [-104, 89] keeps n in that range (fmax and fmin turn a NaN into the bound; a
 * select gives the NaN back). No branch and no library call, so that CPU compilers vectorize it.
 * POCL 3.1's own exp, vectorized across work-items, rounds n with a slower sequence: the exp op
 * is about 2x faster with this one, tanh and gelu 2x, sigmoid 1.4x. Every elementwise f32 exp,
 * tanh, sigmoid, gelu, softplus and erfc goes through these, unfused and fused alike, so both
 * give the same bits; f64 keeps the OpenCL builtins. kernels/norm.cl keeps the builtin exp: on
 * explicit vectors POCL inlines one of its own, which measured as fast as this in softmax. */

/* The exp and tanh functions over a float type FT and the unsigned type UT of its bits: float
 * and uint give the scalar functions below; lib/ops/ew_source.c's vector helpers instantiate
 * float8/uint8 and float16/uint16 (suffixes _v8, _v16) for the epilogues a product applies to
 * whole vectors. Every lane goes through the same correctly rounded operations as the scalar
 * function, so both give the same bits. The constants are cast to FT: fma takes one type.
 *
 * clrun_exp_reduced_f32: e^r - 1 for x's reduced r (r + r^2 q(r)), and in *n the integer n as
 * the low bits of a uint (n mod 2^32: n + b is the exponent n biased by b). x must lie in
 * [-104, 89] or be NaN.
 *
 * clrun_tanh_f32: tanh(x) = sign(x) m / (m + 2), m = e^(2|x|) - 1 computed as 2^n (e^r - 1) +
 * (2^n - 1), which keeps its relative accuracy as |x| goes to 0 (n = 0 there: m is e^r - 1
 * itself). |x| is clamped to 9, where tanh is 1 in float. At most 2.55 ulp over every seventh
 * float (against the double tanh): the roundings of m, m + 2 and the quotient. */
#define CLRUN_EXP_FUNCTIONS(FT, UT, SUFFIX)                                                        \
    CLRUN_INLINE FT clrun_exp_reduced_f32##SUFFIX(const FT x, UT *n)                               \
    {                                                                                              \
        const FT t = fma(x, (FT)(1.44269504e+00f), (FT)(12582912.0f)); /* 1.5 2^23 + x / ln 2 */ \
        const FT nf = t - 12582912.0f;                                                             \
        FT r = fma(nf, (FT)(-6.93145752e-01f), x); /* ln 2 = 0x1.62e4p-1 + 0x1.7f7d1cp-20 */       \
        r = fma(nf, (FT)(-1.42860677e-06f), r);                                                    \
        FT q = (FT)(1.387968659e-03f);                                                             \
        q = fma(q, r, (FT)(8.368694223e-03f));                                                     \
        q = fma(q, r, (FT)(4.166722670e-02f));                                                     \
        q = fma(q, r, (FT)(1.666652113e-01f));                                                     \
        q = fma(q, r, (FT)(4.999999702e-01f));                                                     \
        *n = as_##UT(t) - 0x4b400000u;                                                             \
        return fma(r * r, q, r);                                                                   \
    }                                                                                              \
                                                                                                   \
    CLRUN_INLINE FT clrun_exp_f32##SUFFIX(const FT x)                                              \
    {                                                                                              \
        UT n;                                                                                      \
        const FT p = 1.0f + clrun_exp_reduced_f32##SUFFIX(fmin(fmax(x, -104.0f), 89.0f), &n);      \
        const UT biased = n + 254u, h = biased >> 1; /* two exponents, each biased by 127 */       \
        const FT e = p * as_##FT(h << 23) * as_##FT((biased - h) << 23);                           \
        return isnan(x) ? x : e;                                                                   \
    }                                                                                              \
                                                                                                   \
    CLRUN_INLINE FT clrun_tanh_f32##SUFFIX(const FT x)                                             \
    {                                                                                              \
        UT n;                                                                                      \
        const FT m = clrun_exp_reduced_f32##SUFFIX(2.0f * fmin(fabs(x), 9.0f), &n);                \
        const FT s = as_##FT((n + 127u) << 23); /* 2^n, n in [0, 26] */                            \
        const FT em = fma(s, m, s - 1.0f);                                                         \
        const FT t = copysign(em / (em + 2.0f), x);                                                \
        return isnan(x) ? x : t;                                                                   \
    }

CLRUN_EXP_FUNCTIONS(float, uint, )

/* ---- log in float ------------------------------------------------------------------------
 * log(x) = k ln 2 + log(m), x = 2^k m with m in [sqrt(1/2), sqrt(2)) (k and m taken from the bits:
 * subtracting sqrt(1/2)'s bits carries into the exponent exactly where m would leave the range;
 * a denormal x is first scaled by 2^23). With f = m - 1 (exact) and s = f / (2 + f),
 * log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R(s^2)), R(z) = z (c1 + c2 z + c3 z^2 + c4 z^3)
 * a fit made for clrun (Lawson's weighted least squares toward the minimax of 2 atanh(s)/s - 2
 * over |s| <= 0.1716: 8.8e-10 with float coefficients), summed small terms first so that the
 * result's error is its last roundings: at most 0.83 ulp over every fifth float in [2^-149, 2^128)
 * against the double log. ln 2 in two parts, the second multiplying k first. No library call and
 * no data-dependent branch, so that CPU compilers vectorize it: POCL 3.1's own float log, a
 * scalar call per element, is 16 ns an element on the EPYC (clrun_exp_f32 0.7 ns), which made
 * the audio front-end's log of its spectrogram 0.3 ms of its 1.1. Every elementwise f32 log goes
 * through this, unfused and fused alike; f64 keeps the builtin. log(0) is -inf, log of a negative
 * NaN, log(inf) inf and NaN stays NaN. */
CLRUN_INLINE float clrun_log_f32(const float x)
{
    const bool tiny = x < 0x1p-126f;
    const uint u = as_uint(tiny ? x * 0x1p23f : x) - 0x3f3504f3u; /* sqrt(1/2) */
    const float k = (float)(((int)u >> 23) - (tiny ? 23 : 0));
    const float f = as_float((u & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
    const float s = f / (2.0f + f), z = s * s;
    float r = 2.361064553e-01f;
    r = fma(r, z, 2.853588462e-01f);
    r = fma(r, z, 4.000035524e-01f);
    r = fma(r, z, 6.666666269e-01f) * z;
    const float half_f2 = 0.5f * f * f;
    const float low = fma(s, half_f2 + r, k * 9.0580006145e-06f); /* ln 2 = 0x1.62e3p-1 + 0x1.2fefa2p-17 */
    const float v = fma(k, 6.9313812256e-01f, f - (half_f2 - low));
    const float special = x == 0.0f ? -INFINITY : (x < 0.0f ? as_float(0x7fc00000u) : x);
    return x > 0.0f && x < INFINITY ? v : special;
}

/* ---- erf and erfc in float ---------------------------------------------------------------
 * Two fits made for clrun (least squares, relative error weighted): erf(a) = a P(a^2) below 1
 * (relative error under 1.8e-7), and erfc(a) = exp(-a^2) Q(t), t = 1 / (1 + a/2), for every
 * a >= 0 (t in (0, 1]; relative error under 6e-7 in float, a^2 carried to double length so that
 * its rounding does not grow the error in the tail). erfc is that one formula everywhere, erf
 * the first below 1 and 1 - erfc above. No library call and no data-dependent branch,
 * so that CPU compilers vectorize them. */

float clrun_erf_below_one_f32(float a)
{
    const float s = a * a;
    float p = 7.971016748e-05f;
    p = p * s + -8.043363923e-04f;
    p = p * s + 5.191832315e-03f;
    p = p * s + -2.685550787e-02f;
    p = p * s + 1.128362194e-01f;
    p = p * s + -3.761262894e-01f;
    p = p * s + 1.128379107e+00f;
    return a * p;
}

/* erfc(a) for a >= 0 (or NaN). Past a = 16 erfc is 0 in float, and a * a may overflow: the low
 * part of a^2 is dropped there. */
CLRUN_INLINE float clrun_erfc_nonnegative_f32(float a)
{
    const float t = 1.0f / (1.0f + 0.5f * a);
    float q = -2.512684651e-02f;
    q = fma(q, t, 6.263521314e-02f);
    q = fma(q, t, 3.428883851e-02f);
    q = fma(q, t, -2.022796571e-01f);
    q = fma(q, t, 8.180022240e-02f);
    q = fma(q, t, 5.738471448e-02f);
    q = fma(q, t, 1.806079298e-01f);
    q = fma(q, t, 2.464892417e-01f);
    q = fma(q, t, 2.821054757e-01f);
    q = fma(q, t, 2.820947170e-01f);
    q = q * t;
    const float hi = a * a, lo = a < 16.0f ? fma(a, a, -hi) : 0.0f;
    const float e = clrun_exp_f32(-hi);
    return fma(-e, lo, e) * q; /* exp(-hi - lo) = exp(-hi) (1 - lo) */
}

CLRUN_INLINE float clrun_erf_f32(float x)
{
    const float a = fabs(x);
    const float near = clrun_erf_below_one_f32(x);
    const float far = copysign(1.0f - clrun_erfc_nonnegative_f32(a), x);
    return a < 1.0f ? near : far;
}

CLRUN_INLINE float clrun_erfc_f32(float x)
{
    const float e = clrun_erfc_nonnegative_f32(fabs(x));
    return x < 0.0f ? 2.0f - e : e;
}

/* ---- clip, integer division, power and modulo -------------------------------------------- */

/* lo where v < lo, else hi where v > hi, else v: NaN stays NaN, and lo > hi gives hi (numpy). */
#define CLRUN_CLIP(T, SUFFIX)                                                                      \
    T clrun_clip_##SUFFIX(T v, const T lo, const T hi)                                             \
    {                                                                                              \
        v = v < lo ? lo : v;                                                                       \
        return v > hi ? hi : v;                                                                    \
    }

/* Division truncating toward zero (C, ONNX's Div); b = 0 gives 0, and MIN / -1 wraps to MIN,
 * instead of the trap either would be on a CPU. */
#define CLRUN_IDIV(T, UT, AS_T, AS_U, SUFFIX)                                                      \
    T clrun_div_##SUFFIX(const T a, const T b)                                                     \
    {                                                                                              \
        const T safe = (b == 0 || b == -1) ? (T)1 : b;                                             \
        const T q = a / safe;                                                                      \
        return b == 0 ? (T)0 : b == -1 ? AS_T((UT)((UT)0 - AS_U(a))) : q;                          \
    }

/* a to the power b by squaring, wrapping; a negative b gives the truncated 1 / a^-b (0 unless
 * a is 1 or -1). */
#define CLRUN_IPOW(T, UT, AS_T, AS_U, SUFFIX)                                                      \
    T clrun_pow_##SUFFIX(const T a, const T b)                                                     \
    {                                                                                              \
        if (b < 0)                                                                                 \
            return a == 1 ? (T)1 : a == -1 ? ((b & 1) ? (T)-1 : (T)1) : (T)0;                      \
        UT r = 1, base = AS_U(a), e = AS_U(b);                                                     \
        while (e != 0) {                                                                           \
            if (e & 1)                                                                             \
                r *= base;                                                                         \
            base *= base;                                                                          \
            e >>= 1;                                                                               \
        }                                                                                          \
        return AS_T(r);                                                                            \
    }

/* ONNX's Mod: with c_fmod the remainder of C (the sign of a), else of Python (the sign of b);
 * b = 0 gives 0. */
#define CLRUN_IMOD(T, SUFFIX)                                                                      \
    T clrun_mod_##SUFFIX(const T a, const T b, const T c_fmod)                                     \
    {                                                                                              \
        const bool zero = b == 0 || b == -1;                                                       \
        const T r = zero ? (T)0 : a % (zero ? (T)1 : b);                                           \
        const T floored = (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;                           \
        return c_fmod ? r : floored;                                                               \
    }

/* The same for floats: fmod, or numpy's mod (a zero result takes the sign of b). */
#define CLRUN_FMOD(T, SUFFIX)                                                                      \
    T clrun_mod_##SUFFIX(const T a, const T b, const T c_fmod)                                     \
    {                                                                                              \
        const T r = fmod(a, b);                                                                    \
        const T floored = r == (T)0 ? copysign((T)0, b) : ((r < (T)0) != (b < (T)0)) ? r + b : r; \
        return c_fmod != (T)0 ? r : floored;                                                       \
    }

/* Unsigned division and remainder: b = 0 gives 0 (no sign, so Python's and C's agree). */
#define CLRUN_UDIV(T, SUFFIX)                                                                      \
    T clrun_div_##SUFFIX(const T a, const T b) { return b == 0 ? (T)0 : (T)(a / b); }
#define CLRUN_UMOD(T, SUFFIX)                                                                      \
    T clrun_mod_##SUFFIX(const T a, const T b, const T c_fmod)                                     \
    {                                                                                              \
        (void)c_fmod;                                                                              \
        return b == 0 ? (T)0 : (T)(a % b);                                                         \
    }
/* a to the power b by squaring, wrapping. */
#define CLRUN_UPOW(T, SUFFIX)                                                                      \
    T clrun_pow_##SUFFIX(const T a, const T b)                                                     \
    {                                                                                              \
        T r = 1, base = a, e = b;                                                                  \
        while (e != 0) {                                                                           \
            if (e & 1)                                                                             \
                r = (T)(r * base);                                                                 \
            base = (T)(base * base);                                                               \
            e >>= 1;                                                                               \
        }                                                                                          \
        return r;                                                                                  \
    }

CLRUN_CLIP(float, f32)
CLRUN_CLIP(int, i32)
CLRUN_CLIP(long, i64)
CLRUN_CLIP(char, i8)
CLRUN_CLIP(uchar, u8)
CLRUN_CLIP(short, i16)
CLRUN_CLIP(ushort, u16)
CLRUN_CLIP(uint, u32)
CLRUN_CLIP(ulong, u64)
CLRUN_IDIV(int, uint, as_int, as_uint, i32)
CLRUN_IDIV(long, ulong, as_long, as_ulong, i64)
CLRUN_IDIV(char, uchar, as_char, as_uchar, i8)
CLRUN_IDIV(short, ushort, as_short, as_ushort, i16)
CLRUN_UDIV(uchar, u8)
CLRUN_UDIV(ushort, u16)
CLRUN_UDIV(uint, u32)
CLRUN_UDIV(ulong, u64)
CLRUN_IPOW(int, uint, as_int, as_uint, i32)
CLRUN_IPOW(long, ulong, as_long, as_ulong, i64)
CLRUN_IPOW(char, uchar, as_char, as_uchar, i8)
CLRUN_IPOW(short, ushort, as_short, as_ushort, i16)
CLRUN_UPOW(uchar, u8)
CLRUN_UPOW(ushort, u16)
CLRUN_UPOW(uint, u32)
CLRUN_UPOW(ulong, u64)
CLRUN_IMOD(int, i32)
CLRUN_IMOD(long, i64)
CLRUN_IMOD(char, i8)
CLRUN_IMOD(short, i16)
CLRUN_UMOD(uchar, u8)
CLRUN_UMOD(ushort, u16)
CLRUN_UMOD(uint, u32)
CLRUN_UMOD(ulong, u64)
CLRUN_FMOD(float, f32)

#ifdef CLRUN_HAVE_FP64
CLRUN_CLIP(double, f64)
CLRUN_FMOD(double, f64)
#endif
