/* clrun: the plan as an SVG picture (clrun_plan_write_svg).
 *
 * Time runs across, offset up: each buffer is a rectangle [first, last) x [offset, offset +
 * size), filled with a colour of its own (golden-angle hues, so neighbours differ) and outlined
 * thinly. The lower bound is a dashed line and the peak a solid one, both labelled in binary
 * units. Large plans would make files of tens of megabytes that no viewer opens quickly, so
 * rectangles below a tenth of a square pixel are skipped and at most SVG_MAX_RECTS are drawn
 * (the largest ones); the picture states how many were left out. */
#include "plan/plan_internal.h"

#include <stdlib.h>
#include <string.h>

#define SVG_WIDTH 1200.0
#define SVG_HEIGHT 720.0
#define SVG_LEFT 96.0   /* room for offset tick labels */
#define SVG_RIGHT 170.0 /* the peak and bound labels, clear of every block */
#define SVG_TOP 64.0    /* title and subtitle */
#define SVG_BOTTOM 56.0 /* time tick labels and axis name */
#define SVG_MAX_RECTS 20000
#define SVG_MIN_AREA_PX 0.1
/* Up to this many buffers, each rectangle carries a tooltip. */
#define SVG_TOOLTIP_MAX 5000

/* Where the plot is and how values map onto it. */
typedef struct frame {
    uint64_t t0, t1;   /* time shown */
    double top_bytes;  /* offset at the top edge of the plot */
    double x_scale;    /* pixels per time step */
    double y_scale;    /* pixels per byte */
} frame;

static double frame_x(const frame *f, uint64_t t)
{
    return SVG_LEFT + (double)(t - f->t0) * f->x_scale;
}

static double frame_y(const frame *f, double bytes)
{
    return SVG_HEIGHT - SVG_BOTTOM - bytes * f->y_scale;
}

/* "12.5 MiB": three significant digits in the largest binary unit that keeps the number >= 1. */
static void format_bytes(double bytes, char out[32])
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    size_t u = 0;
    while (bytes >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(out, 32, u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
}

/* 1, 2 or 5 times a power of ten, at least `raw`. */
static double nice_step(double raw)
{
    double p = 1.0;
    while (p * 10 <= raw)
        p *= 10;
    while (p > raw)
        p /= 10;
    if (p >= raw)
        return p;
    if (2 * p >= raw)
        return 2 * p;
    if (5 * p >= raw)
        return 5 * p;
    return 10 * p;
}

/* A colour per buffer: hues spread by the golden angle, mid saturation and lightness. */
static void buffer_colour(size_t i, char out[8])
{
    double h = (double)(i % 1000) * 137.50776405;
    h -= 360.0 * (double)(long)(h / 360.0);
    double s = 0.55, l = 0.62;
    double c = (1 - (2 * l - 1 < 0 ? 1 - 2 * l : 2 * l - 1)) * s;
    double hp = h / 60.0;
    double x = c * (1 - (hp - 2 * (double)(long)(hp / 2) - 1 < 0 ? 1 - (hp - 2 * (double)(long)(hp / 2))
                                                                 : hp - 2 * (double)(long)(hp / 2) - 1));
    double r = 0, g = 0, b = 0;
    if (hp < 1)
        r = c, g = x;
    else if (hp < 2)
        r = x, g = c;
    else if (hp < 3)
        g = c, b = x;
    else if (hp < 4)
        g = x, b = c;
    else if (hp < 5)
        r = x, b = c;
    else
        r = c, b = x;
    double m = l - c / 2;
    snprintf(out, 8, "#%02x%02x%02x", (unsigned)((r + m) * 255 + 0.5), (unsigned)((g + m) * 255 + 0.5),
             (unsigned)((b + m) * 255 + 0.5));
}

static void write_escaped(FILE *out, const char *text)
{
    for (; *text; text++) {
        switch (*text) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default: fputc(*text, out); break;
        }
    }
}

static int compare_double_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* The smallest area (px^2) drawn: SVG_MIN_AREA_PX, raised so that at most SVG_MAX_RECTS pass. */
static clrun_status area_threshold(const clrun_plan_buffer *buffers, size_t n, const frame *f,
                                   double *threshold)
{
    *threshold = SVG_MIN_AREA_PX;
    if (n <= SVG_MAX_RECTS)
        return CLRUN_OK;
    double *areas = malloc(n * sizeof *areas);
    if (!areas)
        return CLRUN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < n; i++)
        areas[i] = (double)(buffers[i].last - buffers[i].first) * f->x_scale *
                   (double)buffers[i].size * f->y_scale;
    qsort(areas, n, sizeof *areas, compare_double_desc);
    /* strictly above the first area left out, so ties do not push the count over */
    if (areas[SVG_MAX_RECTS] >= *threshold)
        *threshold = areas[SVG_MAX_RECTS] * (1 + 1e-9) + 1e-12;
    free(areas);
    return CLRUN_OK;
}

static void write_axes(FILE *out, const frame *f)
{
    double x0 = SVG_LEFT, x1 = SVG_WIDTH - SVG_RIGHT;
    double y0 = SVG_HEIGHT - SVG_BOTTOM, y1 = SVG_TOP;
    fprintf(out, "<g font-size=\"12\" fill=\"#333\">\n");
    /* offset ticks, in the unit that suits the top */
    double unit = 1;
    while (f->top_bytes / unit >= 1024 && unit < 1152921504606846976.0)
        unit *= 1024;
    double step = nice_step(f->top_bytes / unit / 8) * unit;
    for (double v = 0; v <= f->top_bytes + step * 1e-9; v += step) {
        char label[32];
        format_bytes(v, label);
        double y = frame_y(f, v);
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", x0, y, x1, y);
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 6, y + 4, label);
    }
    /* time ticks */
    double span = (double)(f->t1 - f->t0);
    double tstep = nice_step(span / 10 > 1 ? span / 10 : 1);
    for (double t = 0; t <= span + tstep * 1e-9; t += tstep) {
        double x = x0 + t * f->x_scale;
        fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\"/>\n", x, y0, x, y0 + 5);
        fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", x, y0 + 18,
                (double)f->t0 + t);
    }
    fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
            x0, y1, x1 - x0, y0 - y1);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"13\">time (steps)</text>\n",
            (x0 + x1) / 2, SVG_HEIGHT - 14);
    fprintf(out, "<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">offset</text>\n",
            (y0 + y1) / 2);
    fprintf(out, "</g>\n");
}

static size_t write_buffers(FILE *out, const clrun_plan_buffer *buffers, const char *const *names,
                            size_t n, const uint64_t *offsets, const frame *f, double threshold)
{
    size_t skipped = 0;
    fprintf(out, "<g stroke=\"#222\" stroke-width=\"%s\">\n", n > 2000 ? "0.2" : "0.6");
    for (size_t i = 0; i < n; i++) {
        const clrun_plan_buffer *b = &buffers[i];
        double w = (double)(b->last - b->first) * f->x_scale;
        double h = (double)b->size * f->y_scale;
        if (w * h < threshold) {
            skipped++;
            continue;
        }
        char colour[8];
        buffer_colour(i, colour);
        fprintf(out, "<rect class=\"buf\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"",
                frame_x(f, b->first), frame_y(f, (double)offsets[i] + (double)b->size), w, h, colour);
        /* An outline on a sliver would paint it grey: only rectangles of some size get one. */
        if (w < 3 || h < 3)
            fputs(" stroke=\"none\"", out);
        if (n <= SVG_TOOLTIP_MAX) {
            char size[32];
            format_bytes((double)b->size, size);
            fputs("><title>", out);
            if (names && names[i])
                write_escaped(out, names[i]);
            else
                fprintf(out, "buffer %zu", i);
            fprintf(out, ": %s, [%llu, %llu), offset %llu</title></rect>\n", size,
                    (unsigned long long)b->first, (unsigned long long)b->last,
                    (unsigned long long)offsets[i]);
        } else {
            fprintf(out, "/>\n");
        }
    }
    fprintf(out, "</g>\n");
    return skipped;
}

/* The bound (dashed) and the peak (solid) across the plot, labelled in the right margin, where
 * no block is drawn; when the two nearly coincide their labels move apart. */
static void write_levels(FILE *out, const frame *f, uint64_t peak, uint64_t lower_bound)
{
    char text[32];
    double x0 = SVG_LEFT, x1 = SVG_WIDTH - SVG_RIGHT;
    double yp = frame_y(f, (double)peak), yl = frame_y(f, (double)lower_bound);
    bool close = yl - yp < 16;
    format_bytes((double)lower_bound, text);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"1.5\" stroke-dasharray=\"8 5\"/>\n",
            x0, yl, x1, yl);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" fill=\"#c00\">lower bound %s</text>\n",
            x1 + 6, close ? yl + 14 : yl + 4, text);
    format_bytes((double)peak, text);
    fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\" stroke-width=\"1.5\"/>\n",
            x0, yp, x1, yp);
    fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\">peak %s</text>\n", x1 + 6,
            close ? yp - 2 : yp + 4, text);
}

static void write_title(FILE *out, const char *title, size_t n, uint64_t peak,
                        uint64_t lower_bound, size_t skipped)
{
    char p[32], l[32];
    format_bytes((double)peak, p);
    format_bytes((double)lower_bound, l);
    fprintf(out, "<text x=\"%.1f\" y=\"24\" font-size=\"17\" font-weight=\"bold\">", SVG_LEFT);
    write_escaped(out, title ? title : "memory plan");
    fprintf(out, "</text>\n<text x=\"%.1f\" y=\"46\" font-size=\"13\" fill=\"#333\">peak %s, lower bound %s",
            SVG_LEFT, p, l);
    if (lower_bound > 0)
        fprintf(out, " (peak is %+.1f%% over it)", 100.0 * ((double)peak / (double)lower_bound - 1));
    fprintf(out, ", %zu buffers", n);
    if (skipped > 0)
        fprintf(out, " (%zu too small to draw)", skipped);
    fprintf(out, "</text>\n");
}

clrun_status clrun_plan_write_svg(FILE *out, const clrun_plan_buffer *buffers, size_t n,
                                  const uint64_t *offsets, uint64_t lower_bound,
                                  const char *title)
{
    return clrun_plan_write_svg_named(out, buffers, NULL, n, offsets, lower_bound, title);
}

clrun_status clrun_plan_write_svg_named(FILE *out, const clrun_plan_buffer *buffers,
                                        const char *const *names, size_t n,
                                        const uint64_t *offsets, uint64_t lower_bound,
                                        const char *title)
{
    if (!out || (n > 0 && (!buffers || !offsets)))
        return CLRUN_ERROR_INVALID_ARGUMENT;
    frame f = {.t0 = n ? UINT64_MAX : 0, .t1 = n ? 0 : 1};
    uint64_t peak = 0;
    for (size_t i = 0; i < n; i++) {
        if (buffers[i].first < f.t0)
            f.t0 = buffers[i].first;
        if (buffers[i].last > f.t1)
            f.t1 = buffers[i].last;
        if (offsets[i] + buffers[i].size > peak)
            peak = offsets[i] + buffers[i].size;
    }
    double top = (double)(peak > lower_bound ? peak : lower_bound);
    f.top_bytes = top > 0 ? top * 1.08 : 1;
    f.x_scale = (SVG_WIDTH - SVG_LEFT - SVG_RIGHT) / (double)(f.t1 - f.t0);
    f.y_scale = (SVG_HEIGHT - SVG_TOP - SVG_BOTTOM) / f.top_bytes;

    double threshold;
    clrun_status st = area_threshold(buffers, n, &f, &threshold);
    if (st != CLRUN_OK)
        return st;
    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                 "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
            SVG_WIDTH, SVG_HEIGHT, SVG_WIDTH, SVG_HEIGHT);
    fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    write_axes(out, &f);
    size_t skipped = write_buffers(out, buffers, names, n, offsets, &f, threshold);
    write_levels(out, &f, peak, lower_bound);
    write_title(out, title, n, peak, lower_bound, skipped);
    fprintf(out, "</svg>\n");
    return ferror(out) ? CLRUN_ERROR_IO : CLRUN_OK;
}
