/* grid_sample and roi_align (lib/graph/infer_sample.c): one work-item per output element, the
 * coordinates computed from the data (the grid, the boxes) as onnxruntime computes them, in the
 * tensor's own precision. The f64 kernels are built only where the device has doubles; the host
 * asks for them only then. */

/* ---- grid_sample ---------------------------------------------------------------------------
 * x [N, C, H, W], grid [N, HO, WO, 2] (x then y, in [-1, 1] across the image), y [N, C, HO, WO].
 * mode: 0 bilinear, 1 nearest, 2 bicubic; padding: 0 zeros, 1 border, 2 reflection. */
#define GRID_SAMPLE_ARGS                                                                           \
    const ulong n, const uint C, const uint H, const uint W, const uint HO, const uint WO,         \
        const int mode, const int padding, const int align

/* A coordinate reflected by the near border until it lies in [lo, hi]. */
#define GS_REFLECT(T)                                                                              \
    static T gs_reflect_##T(T x, T lo, T hi)                                                       \
    {                                                                                              \
        const T range = hi - lo;                                                                   \
        if (!(range > 0))                                                                          \
            return lo;                                                                             \
        if (x < lo) {                                                                              \
            const T dx = lo - x, k = floor(dx / range), r = dx - k * range;                        \
            return fmod(k, (T)2) == 0 ? lo + r : hi - r;                                           \
        }                                                                                          \
        if (x > hi) {                                                                              \
            const T dx = x - hi, k = floor(dx / range), r = dx - k * range;                        \
            return fmod(k, (T)2) == 0 ? hi - r : lo + r;                                           \
        }                                                                                          \
        return x;                                                                                  \
    }

/* The element at integer (r, c) of one image under the padding mode; a reflected position is
 * clamped too, so no read leaves the image whatever the arithmetic gave. */
#define GS_PIXEL(T)                                                                                \
    static T gs_pixel_##T(__global const T *img, long r, long c, const uint H, const uint W,       \
                          const int padding, const T lo_x, const T hi_x, const T lo_y,             \
                          const T hi_y)                                                            \
    {                                                                                              \
        if (padding == 0) {                                                                        \
            if (c < 0 || c >= (long)W || r < 0 || r >= (long)H)                                    \
                return 0;                                                                          \
        } else if (padding == 2) {                                                                 \
            c = (long)gs_reflect_##T((T)c, lo_x, hi_x);                                            \
            r = (long)gs_reflect_##T((T)r, lo_y, hi_y);                                            \
        }                                                                                          \
        c = clamp(c, 0L, (long)W - 1);                                                             \
        r = clamp(r, 0L, (long)H - 1);                                                             \
        return img[r * (long)W + c];                                                               \
    }

/* Keys' cubic convolution weights (a = -0.75) of the taps at -1, 0, 1, 2 from floor(x), t the
 * fraction. */
#define GS_CUBIC(T)                                                                                \
    static void gs_cubic_##T(T t, T *w)                                                            \
    {                                                                                              \
        const T A = (T)-0.75, s = 1 - t;                                                           \
        w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;                        \
        w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;                                                \
        w[2] = ((A + 2) * s - (A + 3)) * s * s + 1;                                                \
        w[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;                        \
    }

#define GRID_SAMPLE_BODY(T)                                                                        \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const ulong ox = i % WO, oy = (i / WO) % HO, nc = i / ((ulong)WO * HO), b = nc / C;            \
    __global const T *g = grid + ((b * HO + oy) * WO + ox) * 2;                                    \
    __global const T *img = x + nc * H * W;                                                        \
    const T fw = (T)W, fh = (T)H;                                                                  \
    T px = align ? (g[0] + 1) / 2 * (fw - 1) : ((g[0] + 1) * fw - 1) / 2;                          \
    T py = align ? (g[1] + 1) / 2 * (fh - 1) : ((g[1] + 1) * fh - 1) / 2;                          \
    const T lo_x = align ? 0 : (T)-0.5, hi_x = align ? fw - 1 : fw - (T)0.5;                       \
    const T lo_y = align ? 0 : (T)-0.5, hi_y = align ? fh - 1 : fh - (T)0.5;                       \
    if (mode == 1) {                                                                               \
        px = rint(px);                                                                             \
        py = rint(py);                                                                             \
    }                                                                                              \
    if (px < lo_x || px > hi_x || py < lo_y || py > hi_y) {                                        \
        if (padding == 1) {                                                                        \
            px = clamp(px, (T)0, fw - 1);                                                          \
            py = clamp(py, (T)0, fh - 1);                                                          \
        } else if (padding == 2) {                                                                 \
            px = gs_reflect_##T(px, lo_x, hi_x);                                                   \
            py = gs_reflect_##T(py, lo_y, hi_y);                                                   \
        }                                                                                          \
    }                                                                                              \
    /* Far outside (or NaN): every tap is outside either way; keeps the conversions defined. */    \
    px = fmin(fmax(px, (T)-4), fw + 4);                                                            \
    py = fmin(fmax(py, (T)-4), fh + 4);                                                            \
    T v;                                                                                           \
    if (mode == 1) {                                                                               \
        v = gs_pixel_##T(img, (long)py, (long)px, H, W, padding, lo_x, hi_x, lo_y, hi_y);          \
    } else if (mode == 0) {                                                                        \
        const T fx = floor(px), fy = floor(py);                                                    \
        const long x1 = (long)fx, y1 = (long)fy;                                                   \
        const T dx1 = px - fx, dx2 = fx + 1 - px, dy1 = py - fy, dy2 = fy + 1 - py;                \
        const T p11 = gs_pixel_##T(img, y1, x1, H, W, padding, lo_x, hi_x, lo_y, hi_y);            \
        const T p12 = gs_pixel_##T(img, y1, x1 + 1, H, W, padding, lo_x, hi_x, lo_y, hi_y);        \
        const T p21 = gs_pixel_##T(img, y1 + 1, x1, H, W, padding, lo_x, hi_x, lo_y, hi_y);        \
        const T p22 = gs_pixel_##T(img, y1 + 1, x1 + 1, H, W, padding, lo_x, hi_x, lo_y, hi_y);    \
        v = dy2 * (dx2 * p11 + dx1 * p12) + dy1 * (dx2 * p21 + dx1 * p22);                         \
    } else {                                                                                       \
        const T fx = floor(px), fy = floor(py);                                                    \
        const long x0 = (long)fx - 1, y0 = (long)fy - 1;                                           \
        T wx[4], wy[4];                                                                            \
        gs_cubic_##T(px - fx, wx);                                                                 \
        gs_cubic_##T(py - fy, wy);                                                                 \
        v = 0;                                                                                     \
        for (int r = 0; r < 4; r++) {                                                              \
            T row = 0;                                                                             \
            for (int c = 0; c < 4; c++)                                                            \
                row += wx[c] * gs_pixel_##T(img, y0 + r, x0 + c, H, W, padding, lo_x, hi_x,        \
                                            lo_y, hi_y);                                           \
            v += wy[r] * row;                                                                      \
        }                                                                                          \
    }                                                                                              \
    y[i] = v;

GS_REFLECT(float)
GS_PIXEL(float)
GS_CUBIC(float)

__kernel void clrun_grid_sample_f32(__global const float *x, __global const float *grid,
                                    __global float *y, GRID_SAMPLE_ARGS)
{
    GRID_SAMPLE_BODY(float)
}

/* ---- roi_align -----------------------------------------------------------------------------
 * x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2 in the input's scale), batch [R] (i64), y [R, C,
 * OH, OW]. Each bin averages (mode 0) or takes the largest weighted corner of (mode 1, as
 * onnxruntime) its samples: sampling_ratio per axis, or ceil(extent / bins) when 0 (at most
 * max_samples). A batch index outside [0, N) writes 0 and lowers bad[0] to the roi's position:
 * the host reports it. */
#define ROI_ALIGN_ARGS(T)                                                                          \
    const ulong n, const uint N, const uint C, const uint H, const uint W, const uint OH,          \
        const uint OW, const int ratio, const T scale, const int half_pixel, const int mode,       \
        const int max_samples, volatile __global uint *bad

#define ROI_MAX(a, b) ((a) < (b) ? (b) : (a))

#define ROI_ALIGN_BODY(T)                                                                          \
    const size_t i = get_global_id(0);                                                             \
    if (i >= n)                                                                                    \
        return;                                                                                    \
    const ulong pw = i % OW, ph = (i / OW) % OH, c = (i / ((ulong)OW * OH)) % C;                   \
    const ulong r = i / ((ulong)OW * OH * C);                                                      \
    const long b = batch[r];                                                                       \
    if (b < 0 || b >= (long)N) {                                                                   \
        atomic_min(bad, (uint)min(r, (ulong)0xfffffffe));                                          \
        y[i] = 0;                                                                                  \
        return;                                                                                    \
    }                                                                                              \
    __global const T *box = rois + r * 4;                                                          \
    __global const T *img = x + ((ulong)b * C + c) * H * W;                                        \
    const T offset = half_pixel ? (T)0.5 : (T)0;                                                   \
    const T sw = box[0] * scale - offset, sh = box[1] * scale - offset;                            \
    T rw = box[2] * scale - offset - sw, rh = box[3] * scale - offset - sh;                        \
    if (!half_pixel) {                                                                             \
        rw = ROI_MAX(rw, (T)1);                                                                    \
        rh = ROI_MAX(rh, (T)1);                                                                    \
    }                                                                                              \
    const T bh = rh / (T)OH, bw = rw / (T)OW;                                                      \
    T ah = ceil(rh / (T)OH), aw = ceil(rw / (T)OW);                                                \
    const int gh = ratio > 0 ? ratio : !(ah > 0) ? 0 : ah > max_samples ? max_samples : (int)ah;   \
    const int gw = ratio > 0 ? ratio : !(aw > 0) ? 0 : aw > max_samples ? max_samples : (int)aw;   \
    const T count = (T)max(gh * gw, 1);                                                            \
    const T fh = (T)H, fw = (T)W;                                                                  \
    T acc = 0;                                                                                     \
    bool any = false;                                                                              \
    for (int iy = 0; iy < gh; iy++) {                                                              \
        T yy = sh + (T)ph * bh + ((T)iy + (T)0.5) * bh / (T)gh;                                    \
        for (int ix = 0; ix < gw; ix++) {                                                          \
            T xx = sw + (T)pw * bw + ((T)ix + (T)0.5) * bw / (T)gw;                                \
            T v1 = 0, v2 = 0, v3 = 0, v4 = 0;                                                      \
            if (yy >= -1 && yy <= fh && xx >= -1 && xx <= fw) {                                    \
                T py = yy <= 0 ? 0 : yy, px = xx <= 0 ? 0 : xx;                                    \
                long yl = (long)py, xl = (long)px, yh, xh;                                         \
                if (yl >= (long)H - 1) {                                                           \
                    yh = yl = (long)H - 1;                                                         \
                    py = (T)yl;                                                                    \
                } else {                                                                           \
                    yh = yl + 1;                                                                   \
                }                                                                                  \
                if (xl >= (long)W - 1) {                                                           \
                    xh = xl = (long)W - 1;                                                         \
                    px = (T)xl;                                                                    \
                } else {                                                                           \
                    xh = xl + 1;                                                                   \
                }                                                                                  \
                const T ly = py - (T)yl, lx = px - (T)xl, hy = 1 - ly, hx = 1 - lx;                \
                v1 = hy * hx * img[yl * (long)W + xl];                                             \
                v2 = hy * lx * img[yl * (long)W + xh];                                             \
                v3 = ly * hx * img[yh * (long)W + xl];                                             \
                v4 = ly * lx * img[yh * (long)W + xh];                                             \
            }                                                                                      \
            if (mode == 0) {                                                                       \
                acc += v1 + v2 + v3 + v4;                                                          \
            } else {                                                                               \
                const T v = ROI_MAX(ROI_MAX(ROI_MAX(v1, v2), v3), v4);                             \
                acc = any ? ROI_MAX(acc, v) : v;                                                   \
                any = true;                                                                        \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    y[i] = mode == 0 ? acc / count : acc;

__kernel void clrun_roi_align_f32(__global const float *x, __global const float *rois,
                                  __global const long *batch, __global float *y,
                                  ROI_ALIGN_ARGS(float))
{
    ROI_ALIGN_BODY(float)
}

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
GS_REFLECT(double)
GS_PIXEL(double)
GS_CUBIC(double)

__kernel void clrun_grid_sample_f64(__global const double *x, __global const double *grid,
                                    __global double *y, GRID_SAMPLE_ARGS)
{
    GRID_SAMPLE_BODY(double)
}

__kernel void clrun_roi_align_f64(__global const double *x, __global const double *rois,
                                  __global const long *batch, __global double *y,
                                  ROI_ALIGN_ARGS(double))
{
    ROI_ALIGN_BODY(double)
}
#endif
