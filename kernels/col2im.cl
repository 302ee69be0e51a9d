/* col2im: columns summed back into images, the scatter half of a convolution's input gradient
 * computed as a matrix product (lib/grad/grad_conv.c) and ONNX's Col2Im. Every output row is one
 * work-item that alone writes it, adding its terms in a fixed order (no atomics), so a run gives
 * the same bits every time. The geometry is checked by lib/graph/infer_conv.c. */
#pragma OPENCL FP_CONTRACT OFF

/* The outputs o in [0, n) whose tap o * s - p + k lands inside [0, extent): [*lo, *hi), empty
 * when none does (as in conv_grad.cl). */
void tap_range(const int p, const int k, const int s, const int extent, const int n, int *lo,
               int *hi)
{
    const int first = p - k, last = extent - 1 + p - k; /* o * s in [first, last] */
    *lo = first <= 0 ? 0 : min(n, (first + s - 1) / s);
    *hi = last < 0 ? 0 : min(n, last / s + 1);
    *hi = max(*hi, *lo);
}

/* The window row oh whose tap kh lands on image row ih (ih = oh sh - ph + kh dh), or -1 when
 * none does. */
int tap_row(const int ih, const int ph, const int kh, const int dh, const int sh, const int OH)
{
    const int t = ih + ph - kh * dh; /* oh * sh */
    return t < 0 || t % sh != 0 || t / sh >= OH ? -1 : t / sh;
}

/* out [N, C, H, W] from cols: work-item (ih, plane) is row ih of image plane (n * C + c). Column
 * row (c * KH + kh) * KW + kw at position l = oh * OW + ow is element ck * ck_stride + l *
 * l_stride of image n's columns (ck_stride L, l_stride 1 for [N, C*KH*KW, L]; 1 and C*KH*KW for
 * the transposed [N, L, C*KH*KW]), and adds into (ih, iw) = (oh sh - ph + kh dh, ow sw - pw + kw
 * dw). The row starts at zero; then for kh and kw ascending (kh outer) the taps whose oh lands on
 * the row add along it, each element once per tap, so each is one sum in (kh, kw) order. Within
 * one image every index fits an int (infer_conv.c checks). */
__kernel void clrun_col2im_f32(__global const float *cols, __global float *out, const int C,
                               const int H, const int W, const int KH, const int KW, const int OH,
                               const int OW, const int sh, const int sw, const int ph, const int pw,
                               const int dh, const int dw, const int ck_stride, const int l_stride)
{
    const int ih = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (ih >= H)
        return;
    const int c = (int)(plane % C);
    const size_t n = plane / C;
    __global float *row = out + (plane * H + ih) * W;
    for (int iw = 0; iw < W; iw++)
        row[iw] = 0.0f;
    __global const float *image = cols + n * (size_t)C * KH * KW * OH * OW;
    for (int kh = 0; kh < KH; kh++) {
        const int oh = tap_row(ih, ph, kh, dh, sh, OH);
        if (oh < 0)
            continue;
        for (int kw = 0; kw < KW; kw++) {
            int ow_lo, ow_hi;
            tap_range(pw, kw * dw, sw, W, OW, &ow_lo, &ow_hi);
            __global const float *src =
                image + ((c * KH + kh) * KW + kw) * ck_stride + oh * OW * l_stride;
            const int col0 = kw * dw - pw; /* iw at ow 0 */
            if (sw == 1 && l_stride == 1)
                for (int ow = ow_lo; ow < ow_hi; ow++)
                    row[ow + col0] += src[ow];
            else
                for (int ow = ow_lo; ow < ow_hi; ow++)
                    row[ow * sw + col0] += src[ow * l_stride];
        }
    }
}

/* clrun_col2im_f32's sums on CPUs (the host picks it where sw * ceil(W / sw) <= COL2IM_PRIVATE):
 * a tap kw lands on the columns iw = ow sw - pw + kw dw of one phase, iw mod sw, at consecutive
 * ow, so the row is summed in private memory phase by phase, each phase's columns side by side,
 * and each tap's run is a straight loop over ow that a CPU compiler vectorizes (the global row
 * at stride sw, read and written back per tap, kept the row kernel scalar: 0.7 ms for a U-Net's
 * 32 -> 32 4 x 4 stride-2 transpose to 128 x 128). Every element starts at zero and takes its
 * taps in (kh, kw) order, as there: the same bits. Then the row is written once, in order. */
#define COL2IM_PRIVATE 1024
__kernel void clrun_col2im_phases_f32(__global const float *cols, __global float *out, const int C,
                                      const int H, const int W, const int KH, const int KW,
                                      const int OH, const int OW, const int sh, const int sw,
                                      const int ph, const int pw, const int dh, const int dw,
                                      const int ck_stride, const int l_stride)
{
    const int ih = get_global_id(0);
    const size_t plane = get_global_id(1);
    if (ih >= H)
        return;
    const int c = (int)(plane % C);
    const size_t n = plane / C;
    const int Wq = (W + sw - 1) / sw; /* columns of a phase, at most */
    float acc[COL2IM_PRIVATE];
    for (int j = 0; j < sw * Wq; j++)
        acc[j] = 0.0f;
    __global const float *image = cols + n * (size_t)C * KH * KW * OH * OW;
    for (int kh = 0; kh < KH; kh++) {
        const int oh = tap_row(ih, ph, kh, dh, sh, OH);
        if (oh < 0)
            continue;
        for (int kw = 0; kw < KW; kw++) {
            int ow_lo, ow_hi;
            tap_range(pw, kw * dw, sw, W, OW, &ow_lo, &ow_hi);
            const int col0 = kw * dw - pw;             /* iw at ow 0 */
            const int q = ((col0 % sw) + sw) % sw;     /* its phase */
            float *a = acc + q * Wq + (col0 - q) / sw; /* a[ow]: column ow sw + col0 */
            __global const float *src =
                image + ((c * KH + kh) * KW + kw) * ck_stride + oh * OW * l_stride;
            if (l_stride == 1)
                for (int ow = ow_lo; ow < ow_hi; ow++)
                    a[ow] += src[ow];
            else
                for (int ow = ow_lo; ow < ow_hi; ow++)
                    a[ow] += src[ow * l_stride];
        }
    }
    __global float *row = out + (plane * H + ih) * W;
    for (int q = 0; q < sw && q < W; q++) {
        const float *a = acc + q * Wq;
        const int count = (W - q + sw - 1) / sw;
        for (int j = 0; j < count; j++)
            row[q + j * sw] = a[j];
    }
}
