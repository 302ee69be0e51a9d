/* DFT and STFT (opsets 17 and 20) as products with constant matrices of cosines and sines.
 *
 * A signal's last dimension holds a real sample (1) or a complex one (re, im: 2); the result is
 * complex (2). The transform of length N along one axis is one `matmul`: the axis and the
 * real/imaginary pair flattened into a row of M * c values (M = min(length, N): a shorter signal
 * is zero-padded, which adds nothing to the sums, a longer one cut), multiplied by a constant
 * [M * c, 2K] whose column 2k gives the real part of bin k and 2k + 1 its imaginary part, each
 * entry cos or sin of 2 pi (n k mod N) / N computed in double precision (the inverse transform
 * with the opposite sign, divided by N). onesided keeps bins 0 .. N/2 (real input only).
 *
 * STFT is that product applied to every frame: one `conv2d` of the signal as a [batch, c, 1,
 * length] image with a [2K, c, 1, frame_length] kernel (the window multiplied into it) at stride
 * frame_step. frame_step, frame_length and the window must be known at load (the output's shape
 * depends on the first two, the kernel on the window). */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/map.h"

/* The [rows * c, 2 * bins] matrix of a transform of length n_fft (entries of `elem`), row
 * n * c + j the coefficient of sample n's part j (0 real, 1 imaginary), each row scaled by
 * window[n] where a window is given. */
static clrun_status dft_matrix(clrun__imp *im, int elem, int64_t rows, int c, int64_t n_fft, int64_t bins,
                               bool inverse, const double *window, clrun__otensor *t)
{
    int64_t dims[2] = {rows * c, 2 * bins};
    if (!clrun__otensor_alloc(t, elem, 2, dims))
        return clrun__host_result_failed(im, elem, 2, dims);
    double scale = inverse ? 1.0 / (double)n_fft : 1.0, sign = inverse ? 1.0 : -1.0;
    for (int64_t n = 0; n < rows; n++) {
        double w = window ? window[n] * scale : scale;
        int64_t phase = 0; /* (n k) mod N, stepped by n (< N) per bin: no overflow */
        for (int64_t k = 0; k < bins; k++, phase = phase + n >= n_fft ? phase + n - n_fft : phase + n) {
            double angle = 2.0 * M_PI * (double)phase / (double)n_fft;
            double co = cos(angle) * w, si = sign * sin(angle) * w;
            uint64_t row = (uint64_t)(n * c) * (uint64_t)dims[1], col = (uint64_t)(2 * k);
            /* (a + ib)(cos + i si) = a cos - b si + i (a si + b cos) */
            clrun__otensor_set_real(t, row + col, co);
            clrun__otensor_set_real(t, row + col + 1, si);
            if (c == 2) {
                clrun__otensor_set_real(t, row + (uint64_t)dims[1] + col, -si);
                clrun__otensor_set_real(t, row + (uint64_t)dims[1] + col + 1, co);
            }
        }
    }
    return CLRUN_OK;
}

/* A signal's complex dimension: 1 or 2, else a refusal; f32 signals only (the product's). */
static clrun_status complex_dim(clrun__imp *im, const clrun__onode *n, const clrun__value *x, int min_rank, int *c)
{
    const clrun__otensor *s = &x->c;
    char type[32];
    if (s->elem != CLRUN__ONNX_FLOAT)
        return clrun__unsupported(im, "%s of a %s signal is not supported (float is)", n->op,
                                  clrun__onnx_elem_name(s->elem, type, sizeof type));
    if (s->rank < min_rank)
        return clrun__invalid(im, "the input has rank %d (at least %d: batch, signal dims, then 1 for real or 2 "
                              "for complex)", s->rank, min_rank);
    int64_t last = s->dims[s->rank - 1];
    if (last != 1 && last != 2)
        return clrun__invalid(im, "the input's last dimension is %" PRId64 " (1 for real, 2 for complex)", last);
    *c = (int)last;
    return CLRUN_OK;
}

/* An optional scalar length input, known at load and >= 1; *present false when absent. */
static clrun_status length_input(clrun__imp *im, const clrun__onode *n, int i, const char *what, int64_t *out,
                                 bool *present)
{
    double v;
    clrun_status s = clrun__const_real(im, n, i, &v, present);
    if (s != CLRUN_OK || !*present)
        return s;
    if (!(v >= 1 && v < 0x1p40) || v != floor(v))
        return clrun__invalid(im, "%s %g is not a whole number from 1 to 2^40", what, v);
    *out = (int64_t)v;
    return CLRUN_OK;
}

clrun_status clrun__map_dft(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 1);
    int64_t axis = 1, inverse = 0, onesided = 0, n_fft = 0;
    int c = 0;
    bool present = false;
    if (s == CLRUN_OK)
        s = complex_dim(im, n, n->in[0], n->version >= 20 ? 2 : 3, &c); /* 20: no batch needed */
    if (s == CLRUN_OK && n->version >= 20) { /* the axis became input 2, -2 by default */
        int64_t count = 0;
        axis = -2;
        if (n->n_in > 2 && n->in[2]) {
            int got = 0;
            s = clrun__const_ints(im, n, 2, false, &axis, 1, &got);
            count = got;
            if (s == CLRUN_OK && count != 1)
                s = clrun__invalid(im, "axis must be one integer");
        }
    } else if (s == CLRUN_OK) {
        s = clrun__oattr_int(im, n, "axis", 1, &axis);
    }
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "inverse", 0, &inverse);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "onesided", 0, &onesided);
    if (s == CLRUN_OK)
        s = length_input(im, n, 1, "dft_length", &n_fft, &present);
    if (s != CLRUN_OK)
        return s;
    clrun__value *x = n->in[0];
    int rank = x->c.rank, a;
    if ((s = clrun__norm_axis(im, axis, rank, "axis", &a)) != CLRUN_OK)
        return s;
    if (a == rank - 1)
        return clrun__invalid(im, "axis %" PRId64 " is the real/imaginary dimension", axis);
    if (onesided && (inverse || c == 2))
        return clrun__unsupported(im, "onesided=1 is supported for a forward transform of a real signal only");
    int64_t length = x->c.dims[a];
    if (!present)
        n_fft = length;
    if (n_fft < 1)
        return clrun__invalid(im, "the signal has no samples on axis %d", a);
    int64_t bins = onesided ? n_fft / 2 + 1 : n_fft, rows = length < n_fft ? length : n_fft;
    if (rows < length && (s = clrun__mv_slice(im, n, x, a, 0, rows, -1, &x)) != CLRUN_OK)
        return s;

    /* the axis and the complex pair last, flattened into rows of rows * c values */
    int perm[CLRUN__ONNX_MAX_RANK], back[CLRUN__ONNX_MAX_RANK], k = 0;
    int64_t other = 1, flat[2], out_dims[CLRUN__ONNX_MAX_RANK];
    for (int i = 0; i < rank - 1; i++)
        if (i != a) {
            back[i] = k;
            out_dims[k] = x->c.dims[i];
            other *= x->c.dims[i];
            perm[k++] = i;
        }
    back[a] = rank - 2;
    back[rank - 1] = rank - 1;
    perm[k++] = a;
    perm[k++] = rank - 1;
    out_dims[rank - 2] = bins;
    out_dims[rank - 1] = 2;
    flat[0] = other;
    flat[1] = rows * c;
    clrun__otensor t = {0};
    clrun__value *w = NULL, *y = NULL;
    s = clrun__mv_transpose(im, n, x, perm, -1, &x);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, x, 2, flat, -1, &x);
    if (s == CLRUN_OK)
        s = dft_matrix(im, x->c.elem, rows, c, n_fft, bins, inverse != 0, NULL, &t);
    if (s == CLRUN_OK && !(w = clrun__const_value(im, &t)))
        s = CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    clrun__value *ab[2] = {x, w};
    if (s == CLRUN_OK)
        s = clrun__emit1(im, n, "matmul", ab, 2, NULL, 0, -1, &y);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, y, rank, out_dims, -1, &y);
    return s == CLRUN_OK ? clrun__mv_transpose(im, n, y, back, 0, NULL) : s;
}

clrun_status clrun__map_stft(clrun__imp *im, clrun__onode *n)
{
    clrun_status s = clrun__need_inputs(im, n, 2);
    int64_t step = 0, frame = 0, onesided = 1;
    int c = 0;
    bool has_step = false, has_frame = false;
    const clrun__otensor *window = NULL;
    if (s == CLRUN_OK)
        s = complex_dim(im, n, n->in[0], 3, &c);
    if (s == CLRUN_OK && n->in[0]->c.rank != 3)
        s = clrun__invalid(im, "the signal has rank %d ([batch, length, 1 or 2])", n->in[0]->c.rank);
    if (s == CLRUN_OK)
        s = clrun__oattr_int(im, n, "onesided", 1, &onesided);
    if (s == CLRUN_OK)
        s = length_input(im, n, 1, "frame_step", &step, &has_step);
    if (s == CLRUN_OK && !has_step)
        s = clrun__invalid(im, "frame_step is required");
    if (s == CLRUN_OK && n->n_in > 2 && n->in[2]) { /* folded into the transform's constant */
        s = clrun__const_input(im, n, 2, false, &window);
        if (s == CLRUN_OK && window->rank != 1)
            s = clrun__invalid(im, "the window has rank %d (1)", window->rank);
    }
    if (s == CLRUN_OK)
        s = length_input(im, n, 3, "frame_length", &frame, &has_frame);
    if (s != CLRUN_OK)
        return s;
    if (window && has_frame && window->dims[0] != frame)
        return clrun__invalid(im, "the window has %" PRId64 " values for a frame_length of %" PRId64,
                              window->dims[0], frame);
    if (window)
        frame = window->dims[0];
    else if (!has_frame)
        return clrun__invalid(im, "neither a window nor frame_length gives the frame's length");
    if (onesided && c == 2)
        return clrun__unsupported(im, "onesided=1 is supported for a real signal only");
    clrun__value *x = n->in[0];
    int64_t batch = x->c.dims[0], length = x->c.dims[1];
    if (frame < 1 || frame > length)
        return clrun__invalid(im, "a frame of %" PRId64 " samples does not fit a signal of %" PRId64, frame,
                              length);
    int64_t bins = onesided ? frame / 2 + 1 : frame, frames = (length - frame) / step + 1;

    double *win = NULL;
    if (window) {
        if (!(win = malloc(sizeof *win * (size_t)frame)))
            return CLRUN__OOM(im);
        for (int64_t i = 0; i < frame; i++)
            win[i] = clrun__otensor_get_real(window, (uint64_t)i);
    }
    /* the matrix [frame * c, 2 bins] as the kernel [2 bins, c, 1, frame] */
    clrun__otensor m = {0}, kernel = {0};
    int64_t kdims[4] = {2 * bins, c, 1, frame};
    s = dft_matrix(im, x->c.elem, frame, c, frame, bins, false, win, &m);
    free(win);
    if (s == CLRUN_OK && !clrun__otensor_alloc(&kernel, x->c.elem, 4, kdims))
        s = clrun__host_result_failed(im, x->c.elem, 4, kdims);
    if (s != CLRUN_OK) {
        clrun__otensor_free(&m);
        return s;
    }
    for (int64_t o = 0; o < 2 * bins; o++)
        for (int64_t j = 0; j < c; j++)
            for (int64_t i = 0; i < frame; i++)
                clrun__otensor_set_real(&kernel, (uint64_t)((o * c + j) * frame + i),
                                        clrun__otensor_get_real(&m, (uint64_t)((i * c + j) * 2 * bins + o)));
    clrun__otensor_free(&m);
    clrun__value *wt = clrun__const_value(im, &kernel), *y = NULL;
    if (!wt)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;

    static const int to_channels[3] = {0, 2, 1}, to_frames[4] = {0, 3, 1, 2};
    int64_t image[4] = {batch, c, 1, length}, split[4] = {batch, bins, 2, frames};
    clrun__window w = {.spatial = 2, .kernel = {1, frame}, .stride = {1, step}, .dilation = {1, 1}, .group = 1};
    s = clrun__mv_transpose(im, n, x, to_channels, -1, &x);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, x, 4, image, -1, &x);
    if (s == CLRUN_OK)
        s = clrun__conv2d_core(im, n, x, wt, NULL, &w, -1, &y);
    if (s == CLRUN_OK)
        s = clrun__mv_reshape(im, n, y, 4, split, -1, &y);
    return s == CLRUN_OK ? clrun__mv_transpose(im, n, y, to_frames, 0, NULL) : s;
}
