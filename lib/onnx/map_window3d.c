/* 3-D convolutions and pools from 2-D ones: an output depth slice is the sum (Conv) or the
 * maximum or mean (MaxPool, AveragePool) of 2-D windows over the input depth slices its window
 * covers; a transposed convolution's output slice the sum of the 2-D transposed convolutions of
 * the input slices and depth taps that land on it. Depth padding is taken into account on the host: padded slices add nothing to a sum,
 * never win a max, and count in an average only with count_include_pad. Each input slice's 2-D
 * pool is computed once and shared by the output slices that cover it. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "onnx/map.h"

/* The depth window geometry: output depths and, for output od and tap k, the input depth (or
 * -1 inside the padding). */
typedef struct depth {
    int64_t in, out, k, stride, dilation, pad;
} depth;

static int64_t depth_at(const depth *d, int64_t od, int64_t k)
{
    int64_t z = od * d->stride + k * d->dilation - d->pad;
    return z >= 0 && z < d->in ? z : -1;
}

/* The 2-D window of a 3-D one (its height and width). */
static clrun__window plane_of(const clrun__window *w)
{
    clrun__window p = *w;
    p.spatial = 2;
    for (int i = 0; i < 2; i++) {
        p.kernel[i] = w->kernel[i + 1];
        p.stride[i] = w->stride[i + 1];
        p.dilation[i] = w->dilation[i + 1];
        p.pad_begin[i] = w->pad_begin[i + 1];
        p.pad_end[i] = w->pad_end[i + 1];
    }
    return p;
}

/* Depth slice z of x [N, C, D, H, W] as [N, C, H, W]. */
static clrun_status slice_depth(clrun__imp *im, clrun__onode *n, clrun__value *x, int64_t z, clrun__value **r)
{
    int64_t dims[4] = {x->c.dims[0], x->c.dims[1], x->c.dims[3], x->c.dims[4]};
    clrun_status s = clrun__mv_slice(im, n, x, 2, z, 1, -1, r);
    return s == CLRUN_OK ? clrun__mv_reshape(im, n, *r, 4, dims, -1, r) : s;
}

/* Output slices [N, C, H, W] joined on a new depth axis into output 0. */
static clrun_status join_depth(clrun__imp *im, clrun__onode *n, clrun__value **slices, int64_t count)
{
    for (int64_t od = 0; od < count; od++) {
        const clrun__otensor *t = &slices[od]->c;
        int64_t dims[5] = {t->dims[0], t->dims[1], 1, t->dims[2], t->dims[3]};
        clrun_status s = clrun__mv_reshape(im, n, slices[od], 5, dims, count == 1 ? 0 : -1, &slices[od]);
        if (s != CLRUN_OK)
            return s;
    }
    return count == 1 ? CLRUN_OK : clrun__mv_concat(im, n, slices, (int)count, 2, 0, NULL);
}

static clrun_status depth_of(clrun__imp *im, const clrun__value *x, const clrun__window *w, bool ceil_mode,
                             depth *d)
{
    d->in = x->c.dims[2];
    d->k = w->kernel[0];
    d->stride = w->stride[0];
    d->dilation = w->dilation[0];
    d->pad = w->pad_begin[0];
    int64_t room = d->in + w->pad_begin[0] + w->pad_end[0] - ((d->k - 1) * d->dilation + 1);
    if (room < 0)
        return clrun__invalid(im, "the window does not fit the depth of %" PRId64, d->in);
    d->out = (ceil_mode ? (room + d->stride - 1) / d->stride : room / d->stride) + 1;
    if (d->out > 256)
        return clrun__unsupported(im, "a 3-D window over %" PRId64 " output depths (at most 256)", d->out);
    for (int64_t od = 0; od < d->out; od++) {
        bool any = false;
        for (int64_t k = 0; k < d->k && !any; k++)
            any = depth_at(d, od, k) >= 0;
        if (!any)
            return clrun__unsupported(im, "output depth %" PRId64 " would see padding only", od);
    }
    return CLRUN_OK;
}

clrun_status clrun__conv3d(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                           clrun__value *bias, const clrun__window *w)
{
    depth d;
    clrun_status s = depth_of(im, x, w, false, &d);
    if (s != CLRUN_OK)
        return s;
    int64_t planes;
    if (!clrun__mul_i64(d.out, d.k, &planes) || planes > 1024)
        return clrun__unsupported(im, "a 3-D convolution of %" PRId64 " output depths by %" PRId64
                                  " taps (at most 1024 2-D ones)", d.out, d.k);
    clrun__window plane = plane_of(w);
    clrun__value **taps = calloc((size_t)d.k, sizeof *taps), **slices = calloc((size_t)d.out, sizeof *slices);
    if (!taps || !slices)
        s = CLRUN__OOM(im);
    /* The weights' depth taps [M, C/g, KH, KW]. */
    int64_t wd[4] = {wt->c.dims[0], wt->c.dims[1], wt->c.dims[3], wt->c.dims[4]};
    for (int64_t k = 0; s == CLRUN_OK && k < d.k; k++) {
        s = clrun__mv_slice(im, n, wt, 2, k, 1, -1, &taps[k]);
        if (s == CLRUN_OK)
            s = clrun__mv_reshape(im, n, taps[k], 4, wd, -1, &taps[k]);
    }
    for (int64_t od = 0; s == CLRUN_OK && od < d.out; od++) {
        clrun__value *sum = NULL;
        for (int64_t k = 0; s == CLRUN_OK && k < d.k; k++) {
            int64_t z = depth_at(&d, od, k);
            if (z < 0)
                continue;
            clrun__value *xz, *y;
            s = slice_depth(im, n, x, z, &xz);
            if (s == CLRUN_OK) /* the bias once, with the first tap */
                s = clrun__conv2d_core(im, n, xz, taps[k], sum ? NULL : bias, &plane, -1, &y);
            if (s == CLRUN_OK)
                s = sum ? clrun__emit_binary(im, n, "add", sum, y, -1, &sum) : (sum = y, CLRUN_OK);
        }
        slices[od] = sum;
    }
    if (s == CLRUN_OK)
        s = join_depth(im, n, slices, d.out);
    free(taps);
    free(slices);
    return s;
}

/* Input depth z times depth tap k lands on output depth z * stride + k * dilation - pad_begin of
 * the out_depth ones; an output depth no pair lands on is zeros (plus the bias). */
clrun_status clrun__conv_transpose3d(clrun__imp *im, clrun__onode *n, clrun__value *x, clrun__value *wt,
                                     clrun__value *bias, const clrun__window *w, const int64_t *out_pad)
{
    int64_t in = x->c.dims[2], k = w->kernel[0], stride = w->stride[0], dilation = w->dilation[0];
    int64_t out = 0, pairs;
    if (!clrun__mul_i64(stride, in - 1, &out) || !clrun__add_i64(out, (k - 1) * dilation + 1 + out_pad[0], &out) ||
        !clrun__add_i64(out, -(w->pad_begin[0] + w->pad_end[0]), &out) || out < 1)
        return clrun__invalid(im, "the output has no depth (input depth %" PRId64 ", kernel %" PRId64
                              ", pads %" PRId64 " and %" PRId64 ")", in, k, w->pad_begin[0], w->pad_end[0]);
    if (!clrun__mul_i64(in, k, &pairs) || pairs > 1024 || out > 1024)
        return clrun__unsupported(im, "a 3-D transposed convolution of %" PRId64 " input depths by %" PRId64
                                  " taps into %" PRId64 " output depths (at most 1024 2-D ones each)", in, k, out);
    clrun__window plane = plane_of(w);
    int64_t plane_pad[2] = {out_pad[1], out_pad[2]};
    clrun__value **taps = calloc((size_t)k, sizeof *taps), **slices = calloc((size_t)out, sizeof *slices);
    clrun__value *bias3 = NULL, *zeros = NULL;
    clrun_status s = taps && slices ? CLRUN_OK : CLRUN__OOM(im);
    /* The weights' depth taps [C, M/g, KH, KW]. */
    int64_t wd[4] = {wt->c.dims[0], wt->c.dims[1], wt->c.dims[3], wt->c.dims[4]};
    for (int64_t t = 0; s == CLRUN_OK && t < k; t++) {
        s = clrun__mv_slice(im, n, wt, 2, t, 1, -1, &taps[t]);
        if (s == CLRUN_OK)
            s = clrun__mv_reshape(im, n, taps[t], 4, wd, -1, &taps[t]);
    }
    if (s == CLRUN_OK && bias) {
        int64_t per_channel[3] = {bias->c.dims[0], 1, 1};
        s = clrun__mv_reshape(im, n, bias, 3, per_channel, -1, &bias3);
    }
    for (int64_t z = 0; s == CLRUN_OK && z < in; z++) {
        clrun__value *xz = NULL;
        for (int64_t t = 0; s == CLRUN_OK && t < k; t++) {
            int64_t od = z * stride + t * dilation - w->pad_begin[0];
            if (od < 0 || od >= out)
                continue;
            clrun__value *y;
            if (xz == NULL)
                s = slice_depth(im, n, x, z, &xz);
            if (s == CLRUN_OK)
                s = clrun__conv_transpose2d_core(im, n, xz, taps[t], NULL, &plane, plane_pad, -1, &y);
            if (s == CLRUN_OK)
                s = slices[od] ? clrun__emit_binary(im, n, "add", slices[od], y, -1, &slices[od])
                               : (slices[od] = y, CLRUN_OK);
        }
    }
    for (int64_t od = 0; s == CLRUN_OK && od < out; od++) {
        if (slices[od] == NULL) { /* no pair lands here: zeros of a 2-D transposed output's shape */
            if (zeros == NULL) {
                int64_t dims[4] = {x->c.dims[0], wt->c.dims[1] * w->group, 0, 0};
                bool fits = true;
                for (int i = 0; i < 2; i++) {
                    int64_t grown, span;
                    fits = fits && clrun__mul_i64(x->c.dims[3 + i] - 1, plane.stride[i], &grown) &&
                           clrun__mul_i64(plane.kernel[i] - 1, plane.dilation[i], &span) &&
                           clrun__add_i64(grown, span, &dims[2 + i]) &&
                           clrun__add_i64(dims[2 + i], 1 + plane_pad[i] - plane.pad_begin[i] - plane.pad_end[i],
                                          &dims[2 + i]) && dims[2 + i] >= 1;
                }
                clrun__otensor t = {0};
                if (!fits) {
                    s = clrun__invalid(im, "the output's height or width is empty or larger than 2^63 - 1");
                    break;
                }
                if (!clrun__otensor_alloc(&t, x->c.elem, 4, dims))
                    s = CLRUN__OOM(im);
                else if (!(zeros = clrun__const_value(im, &t)))
                    s = CLRUN_ERROR_OUT_OF_HOST_MEMORY; /* recorded */
                if (s != CLRUN_OK)
                    break;
            }
            slices[od] = zeros;
        }
        if (s == CLRUN_OK && bias3)
            s = clrun__emit_binary(im, n, "add", slices[od], bias3, -1, &slices[od]);
    }
    if (s == CLRUN_OK)
        s = join_depth(im, n, slices, out);
    free(taps);
    free(slices);
    return s;
}

clrun_status clrun__pool3d(clrun__imp *im, clrun__onode *n, clrun__value *x, const clrun__window *w, bool max,
                           bool include_pad)
{
    depth d;
    clrun_status s = depth_of(im, x, w, w->ceil_mode, &d);
    if (s != CLRUN_OK)
        return s;
    if (w->ceil_mode && !max)
        return clrun__unsupported(im, "ceil_mode=1 for a 3-D AveragePool is not supported");
    clrun__window plane = plane_of(w);
    clrun__value **pooled = calloc((size_t)d.in, sizeof *pooled), **slices = calloc((size_t)d.out, sizeof *slices);
    if (!pooled || !slices)
        s = CLRUN__OOM(im);
    for (int64_t od = 0; s == CLRUN_OK && od < d.out; od++) {
        clrun__value *acc = NULL;
        int64_t taps = 0;
        for (int64_t k = 0; s == CLRUN_OK && k < d.k; k++) {
            int64_t z = depth_at(&d, od, k);
            if (z < 0)
                continue;
            if (pooled[z] == NULL) {
                clrun__value *xz;
                s = slice_depth(im, n, x, z, &xz);
                if (s == CLRUN_OK)
                    s = clrun__pool2d_core(im, n, xz, &plane, max, include_pad, -1, &pooled[z]);
                if (s != CLRUN_OK)
                    break;
            }
            taps++;
            s = acc ? clrun__emit_binary(im, n, max ? "maximum" : "add", acc, pooled[z], -1, &acc)
                    : (acc = pooled[z], CLRUN_OK);
        }
        /* An average of the 2-D averages over the taps that count: the in-depth ones, or every
         * tap (padding included) with count_include_pad. */
        int64_t count = include_pad ? d.k : taps;
        if (s == CLRUN_OK && !max && count > 1) {
            clrun__value *c = clrun__scalar_value(im, acc->c.elem, (double)count, acc->c.rank);
            s = c ? clrun__emit_binary(im, n, "div", acc, c, -1, &acc) : CLRUN_ERROR_OUT_OF_HOST_MEMORY;
        }
        slices[od] = acc;
    }
    if (s == CLRUN_OK)
        s = join_depth(im, n, slices, d.out);
    free(pooled);
    free(slices);
    return s;
}
