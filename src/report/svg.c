/* svg.c: the inline SVG charts of svg.h.
 *
 * Layout of every chart: a title line at the top, a plot box with a margin
 * for the y tick labels on the left and the x tick labels below, light grid
 * lines at the ticks. Data coordinates go through one mapping per axis,
 * px = box0 + (v - lo) / (hi - lo) * (box1 - box0), with lo < hi finite and
 * v finite (non-finite samples are dropped before), so every coordinate
 * written is finite; coord() guards it once more before printing. */
#include "report/svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FONT_TITLE 14
#define FONT_TICK 11
#define COLOR_AXIS "#555"
#define COLOR_GRID "#e6e6e6"
#define COLOR_TEXT "#222"
#define COLOR_MUTED "#777"
#define COLOR_POS "#2e9e5b"
#define COLOR_NEG "#d64541"
#define COLOR_MEAN "#1f5fbf"
#define COLOR_BAR "#4c72b0"

int st_svg_ok(double v) { return isfinite(v) && fabs(v) <= ST_SVG_MAX_ABS; }

void st_xml_escape(FILE *f, const char *s) {
    if (!s) return;
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* A coordinate as printed: one decimal is a tenth of a viewBox unit. */
static void coord(FILE *f, double v) { fprintf(f, "%.1f", isfinite(v) ? v : 0.0); }

/* --- axes ------------------------------------------------------------------ */

typedef struct {
    double lo, hi, step; /* range drawn and tick spacing */
    int decimals;        /* tick label decimals, from the step */
    int sci;             /* labels in %g form (huge or tiny numbers) */
} axis;

/* The 1-2-5 step nearest raw, and the decimals its labels need. */
static double nice_step(double raw, int *decimals) {
    double e = floor(log10(raw));
    double m = raw / pow(10, e);
    double nice = m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10;
    if (nice == 10) {
        nice = 1;
        e += 1;
    }
    *decimals = e < 0 ? (int)-e : 0;
    return nice * pow(10, e);
}

/* An axis over data [lo, hi] with about `ticks` ticks. A constant range is
 * widened so the line sits in the middle; pad adds 5% each side. */
static axis axis_make(double lo, double hi, int ticks, int pad, int integer) {
    axis a;
    if (ticks < 2) ticks = 2;
    if (!(hi > lo)) {
        double d = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= d;
        hi += d;
    }
    if (pad) {
        double p = (hi - lo) * 0.05;
        lo -= p;
        hi += p;
    }
    a.lo = lo;
    a.hi = hi;
    a.step = nice_step((hi - lo) / ticks, &a.decimals);
    if (integer && a.step < 1) {
        a.step = 1;
        a.decimals = 0;
    }
    double big = fmax(fabs(lo), fabs(hi));
    a.sci = big >= 1e4 || a.decimals > 5;
    return a;
}

static double axis_map(const axis *a, double v, double p0, double p1) {
    return p0 + (v - a->lo) / (a->hi - a->lo) * (p1 - p0);
}

/* Tick k is at (first + k) * step: computed by index so ticks do not drift. */
static int axis_ticks(const axis *a, double *out, int cap) {
    double first = ceil(a->lo / a->step - 1e-9);
    int n = 0;
    for (int k = 0; n < cap; k++) {
        double t = (first + k) * a->step;
        if (t > a->hi + a->step * 1e-9) break;
        if (fabs(t) < a->step * 1e-9) t = 0; /* never print "-0" */
        out[n++] = t;
    }
    return n;
}

/* Tick labels: fixed decimals from the step; large numbers (env steps) with
 * an SI suffix ("200k", "1.2M"); anything else out of range in %g form. */
static void tick_label(char *buf, size_t cap, const axis *a, double v) {
    static const char *si[] = {"k", "M", "G", "T"};
    if (!a->sci) {
        snprintf(buf, cap, "%.*f", a->decimals, v);
        return;
    }
    double m = fabs(v);
    int e = -1;
    while (m >= 1000 && e < 3) {
        m /= 1000;
        e++;
    }
    if (e >= 0 && m < 1000)
        snprintf(buf, cap, "%s%.3g%s", v < 0 ? "-" : "", m, si[e]);
    else
        snprintf(buf, cap, "%.3g", v);
}

/* --- frame pieces ---------------------------------------------------------- */

typedef struct {
    double x0, x1, y0, y1; /* plot box: x0 < x1 left to right, y0 < y1 top to bottom */
} box;

static void svg_open(FILE *f, int w, int h, const char *title) {
    fprintf(f, "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" role=\"img\">", w, h);
    fputs("<title>", f);
    st_xml_escape(f, title);
    fputs("</title>\n", f);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"%d\" font-weight=\"600\" fill=\"%s\">", FONT_TITLE, COLOR_TEXT);
    st_xml_escape(f, title);
    fputs("</text>\n", f);
}

static void svg_text(FILE *f, double x, double y, const char *anchor, int size, const char *color, const char *s) {
    fputs("<text x=\"", f);
    coord(f, x);
    fputs("\" y=\"", f);
    coord(f, y);
    fprintf(f, "\" text-anchor=\"%s\" font-size=\"%d\" fill=\"%s\">", anchor, size, color);
    st_xml_escape(f, s);
    fputs("</text>\n", f);
}

/* Text with a white outline, readable on top of bars and grid lines. */
static void svg_text_halo(FILE *f, double x, double y, const char *anchor, int size, const char *color, const char *s) {
    fputs("<text x=\"", f);
    coord(f, x);
    fputs("\" y=\"", f);
    coord(f, y);
    fprintf(f,
            "\" text-anchor=\"%s\" font-size=\"%d\" fill=\"%s\" stroke=\"#fff\" stroke-width=\"3\" "
            "stroke-linejoin=\"round\" paint-order=\"stroke\">",
            anchor, size, color);
    st_xml_escape(f, s);
    fputs("</text>\n", f);
}

static void svg_line(FILE *f, double x1, double y1, double x2, double y2, const char *color, double width,
                     const char *dash) {
    fputs("<line x1=\"", f);
    coord(f, x1);
    fputs("\" y1=\"", f);
    coord(f, y1);
    fputs("\" x2=\"", f);
    coord(f, x2);
    fputs("\" y2=\"", f);
    coord(f, y2);
    fprintf(f, "\" stroke=\"%s\" stroke-width=\"%.1f\"", color, width);
    if (dash) fprintf(f, " stroke-dasharray=\"%s\"", dash);
    fputs("/>\n", f);
}

static void svg_rect(FILE *f, double x, double y, double w, double h, const char *fill) {
    fputs("<rect x=\"", f);
    coord(f, x);
    fputs("\" y=\"", f);
    coord(f, y);
    fputs("\" width=\"", f);
    coord(f, w > 0 ? w : 0);
    fputs("\" height=\"", f);
    coord(f, h > 0 ? h : 0);
    fprintf(f, "\" fill=\"%s\"", fill);
}

/* The frame of a chart with nothing to show. */
static void svg_empty(FILE *f, int w, int h, const char *title, const char *msg) {
    svg_open(f, w, h, title);
    svg_rect(f, 10, 32, w - 20, h - 42, "#fafafa");
    fprintf(f, " stroke=\"%s\"/>\n", COLOR_GRID);
    svg_text(f, w / 2.0, h / 2.0 + 10, "middle", 14, COLOR_MUTED, msg ? msg : "no data");
    fputs("</svg>\n", f);
}

/* Horizontal grid lines and y tick labels. */
static void draw_y_axis(FILE *f, const box *b, const axis *ay) {
    double t[64];
    char lab[48];
    int n = axis_ticks(ay, t, 64);
    for (int i = 0; i < n; i++) {
        double y = axis_map(ay, t[i], b->y1, b->y0);
        svg_line(f, b->x0, y, b->x1, y, COLOR_GRID, 1, NULL);
        tick_label(lab, sizeof lab, ay, t[i]);
        svg_text(f, b->x0 - 6, y + 4, "end", FONT_TICK, COLOR_AXIS, lab);
    }
}

/* Vertical tick marks and x tick labels. */
static void draw_x_axis(FILE *f, const box *b, const axis *ax) {
    double t[64];
    char lab[48];
    int n = axis_ticks(ax, t, 64);
    for (int i = 0; i < n; i++) {
        double x = axis_map(ax, t[i], b->x0, b->x1);
        svg_line(f, x, b->y1, x, b->y1 + 4, COLOR_AXIS, 1, NULL);
        tick_label(lab, sizeof lab, ax, t[i]);
        svg_text(f, x, b->y1 + 17, "middle", FONT_TICK, COLOR_AXIS, lab);
    }
    svg_line(f, b->x0, b->y1, b->x1, b->y1, COLOR_AXIS, 1, NULL);
    svg_line(f, b->x0, b->y0, b->x0, b->y1, COLOR_AXIS, 1, NULL);
}

static void draw_axis_labels(FILE *f, const box *b, int h, const char *x_label, const char *y_label) {
    if (x_label) svg_text(f, (b->x0 + b->x1) / 2, h - 6, "middle", FONT_TICK, COLOR_MUTED, x_label);
    if (y_label) {
        double cx = 14, cy = (b->y0 + b->y1) / 2;
        fputs("<text transform=\"translate(", f);
        coord(f, cx);
        fputc(',', f);
        coord(f, cy);
        fprintf(f, ") rotate(-90)\" text-anchor=\"middle\" font-size=\"%d\" fill=\"%s\">", FONT_TICK, COLOR_MUTED);
        st_xml_escape(f, y_label);
        fputs("</text>\n", f);
    }
}

/* --- line charts ----------------------------------------------------------- */

typedef struct {
    double x, y;
    int gap; /* a break before this point */
} pt;

static double series_x(const st_svg_series *s, int i) { return s->x ? s->x[i] : (double)i; }

static int point_ok(const st_svg_series *s, int i) { return st_svg_ok(s->y[i]) && st_svg_ok(series_x(s, i)); }

/* The samples to draw: all of them when few, else per bucket the min and the
 * max of y in index order. Non-finite samples become gaps. Returns count. */
static int downsample(const st_svg_series *s, pt *out) {
    int n = s->n, m = 0, gap = 0;
    if (n <= ST_SVG_MAX_POINTS) {
        for (int i = 0; i < n; i++) {
            if (!point_ok(s, i)) {
                gap = 1;
                continue;
            }
            out[m++] = (pt){series_x(s, i), s->y[i], gap};
            gap = 0;
        }
        return m;
    }
    int buckets = ST_SVG_MAX_POINTS / 2;
    for (int b = 0; b < buckets; b++) {
        long i0 = (long)n * b / buckets, i1 = (long)n * (b + 1) / buckets;
        long lo = -1, hi = -1;
        for (long i = i0; i < i1; i++) {
            if (!point_ok(s, (int)i)) continue;
            if (lo < 0 || s->y[i] < s->y[lo]) lo = i;
            if (hi < 0 || s->y[i] > s->y[hi]) hi = i;
        }
        if (lo < 0) {
            gap = 1;
            continue;
        }
        long first = lo < hi ? lo : hi, second = lo < hi ? hi : lo;
        out[m++] = (pt){series_x(s, (int)first), s->y[first], gap};
        if (second != first) out[m++] = (pt){series_x(s, (int)second), s->y[second], 0};
        gap = 0;
    }
    return m;
}

/* Data extent over every drawable sample; returns 0 when there is none. */
static int extent(const st_svg_line_chart *c, double *xlo, double *xhi, double *ylo, double *yhi) {
    int any = 0;
    *xlo = *ylo = INFINITY;
    *xhi = *yhi = -INFINITY;
    for (int k = 0; k < c->n_series; k++) {
        const st_svg_series *s = &c->series[k];
        if (!s->y) continue;
        for (int i = 0; i < s->n; i++) {
            if (!point_ok(s, i)) continue;
            double x = series_x(s, i), y = s->y[i];
            *xlo = fmin(*xlo, x);
            *xhi = fmax(*xhi, x);
            *ylo = fmin(*ylo, y);
            *yhi = fmax(*yhi, y);
            any = 1;
        }
    }
    return any;
}

static void path_points(FILE *f, const pt *p, int m, const box *b, const axis *ax, const axis *ay) {
    for (int i = 0; i < m; i++) {
        fputc(i == 0 || p[i].gap ? 'M' : 'L', f);
        coord(f, axis_map(ax, p[i].x, b->x0, b->x1));
        fputc(' ', f);
        coord(f, axis_map(ay, p[i].y, b->y1, b->y0));
    }
}

/* The area between each unbroken run of points and y = 0. */
static void path_area(FILE *f, const pt *p, int m, const box *b, const axis *ax, const axis *ay, const char *color) {
    double y0 = axis_map(ay, fmin(fmax(0, ay->lo), ay->hi), b->y1, b->y0);
    fputs("<path d=\"", f);
    for (int i = 0; i < m;) {
        int j = i + 1;
        while (j < m && !p[j].gap)
            j++;
        fputc('M', f);
        coord(f, axis_map(ax, p[i].x, b->x0, b->x1));
        fputc(' ', f);
        coord(f, y0);
        for (int k = i; k < j; k++) {
            fputc('L', f);
            coord(f, axis_map(ax, p[k].x, b->x0, b->x1));
            fputc(' ', f);
            coord(f, axis_map(ay, p[k].y, b->y1, b->y0));
        }
        fputc('L', f);
        coord(f, axis_map(ax, p[j - 1].x, b->x0, b->x1));
        fputc(' ', f);
        coord(f, y0);
        fputc('Z', f);
        i = j;
    }
    fprintf(f, "\" fill=\"%s\" fill-opacity=\"0.25\" stroke=\"none\"/>\n", color);
}

static void draw_series(FILE *f, const st_svg_series *s, const box *b, const axis *ax, const axis *ay, int area,
                        pt *buf) {
    if (!s->y || s->n <= 0) return;
    int m = downsample(s, buf);
    if (m == 0) return;
    if (area) path_area(f, buf, m, b, ax, ay, s->color);
    fputs("<path d=\"", f);
    path_points(f, buf, m, b, ax, ay);
    fprintf(f,
            "\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" stroke-linejoin=\"round\" "
            "stroke-linecap=\"round\"",
            s->color);
    if (s->opacity > 0 && s->opacity < 1) fprintf(f, " stroke-opacity=\"%.2f\"", s->opacity);
    if (s->dashed) fputs(" stroke-dasharray=\"6 4\"", f);
    fputs("/>\n", f);
}

/* Drawn points of every series that fall inside rectangle (x, y, w, h). */
static int points_inside(const st_svg_line_chart *c, const box *b, const axis *ax, const axis *ay, pt *buf, double x,
                         double y, double w, double h) {
    int hits = 0;
    for (int k = 0; k < c->n_series; k++) {
        const st_svg_series *s = &c->series[k];
        if (!s->y || s->n <= 0) continue;
        int m = downsample(s, buf);
        for (int i = 0; i < m; i++) {
            double px = axis_map(ax, buf[i].x, b->x0, b->x1), py = axis_map(ay, buf[i].y, b->y1, b->y0);
            hits += px >= x && px <= x + w && py >= y && py <= y + h;
        }
    }
    return hits;
}

/* Legend entries on a white card in whichever corner of the plot box covers
 * the fewest data points (ties: top-left, top-right, bottom-left, -right). */
static void draw_legend(FILE *f, const st_svg_line_chart *c, const box *b, const axis *ax, const axis *ay, pt *buf) {
    int n = 0;
    size_t longest = 0;
    for (int k = 0; k < c->n_series; k++)
        if (c->series[k].name) {
            n++;
            size_t l = strlen(c->series[k].name);
            if (l > longest) longest = l;
        }
    if (n == 0) return;
    double w = 34 + 6.2 * (double)longest, h = 8 + 16.0 * n;
    double cx[4] = {b->x0 + 8, b->x1 - 8 - w, b->x0 + 8, b->x1 - 8 - w};
    double cy[4] = {b->y0 + 6, b->y0 + 6, b->y1 - 6 - h, b->y1 - 6 - h};
    int best = 0, best_hits = -1;
    for (int k = 0; buf && k < 4; k++) {
        int hits = points_inside(c, b, ax, ay, buf, cx[k], cy[k], w, h);
        if (best_hits < 0 || hits < best_hits) best = k, best_hits = hits;
    }
    double x = cx[best], y = cy[best];
    svg_rect(f, x, y, w, h, "#fff");
    fputs(" fill-opacity=\"0.85\" stroke=\"#ddd\"/>\n", f);
    y += 13;
    for (int k = 0; k < c->n_series; k++) {
        const st_svg_series *s = &c->series[k];
        if (!s->name) continue;
        fputs("<g", f);
        if (s->opacity > 0 && s->opacity < 1) fprintf(f, " opacity=\"%.2f\"", s->opacity);
        fputs(">", f);
        svg_line(f, x + 6, y - 4, x + 26, y - 4, s->color, 2.2, s->dashed ? "6 4" : NULL);
        fputs("</g>", f);
        svg_text(f, x + 32, y, "start", FONT_TICK, COLOR_TEXT, s->name);
        y += 16;
    }
}

void st_svg_line(FILE *f, const st_svg_line_chart *c) {
    double xlo, xhi, ylo, yhi;
    if (!extent(c, &xlo, &xhi, &ylo, &yhi)) {
        svg_empty(f, c->width, c->height, c->title, c->empty);
        return;
    }
    if (c->area) {
        ylo = fmin(ylo, 0);
        yhi = fmax(yhi, 0);
    }
    if (c->has_ref && st_svg_ok(c->ref)) {
        ylo = fmin(ylo, c->ref);
        yhi = fmax(yhi, c->ref);
    }
    box b = {64, c->width - 16.0, 34, c->height - (c->x_label ? 40.0 : 26.0)};
    axis ax = axis_make(xlo, xhi, (int)((b.x1 - b.x0) / 90), 0, c->x_integer);
    int y_ticks = (int)fmax(3, (b.y1 - b.y0) / 50);
    axis ay = axis_make(ylo, yhi, y_ticks, 1, 0);
    /* An area under zero (drawdown) ends at zero: no empty band above it. */
    if (c->area && yhi <= 0) ay = axis_make(ylo < 0 ? ylo * 1.05 : -1, 0, y_ticks, 0, 0);
    int cap = 0;
    for (int k = 0; k < c->n_series; k++)
        cap = c->series[k].n > cap ? c->series[k].n : cap;
    pt *buf = malloc(sizeof(pt) * (size_t)(cap < ST_SVG_MAX_POINTS ? cap : ST_SVG_MAX_POINTS) + sizeof(pt));
    svg_open(f, c->width, c->height, c->title);
    draw_y_axis(f, &b, &ay);
    if (c->has_ref && st_svg_ok(c->ref)) {
        double y = axis_map(&ay, c->ref, b.y1, b.y0);
        svg_line(f, b.x0, y, b.x1, y, COLOR_AXIS, 1, "3 3");
    }
    for (int k = 0; buf && k < c->n_series; k++)
        draw_series(f, &c->series[k], &b, &ax, &ay, c->area && k == 0, buf);
    if (!buf) svg_text(f, (b.x0 + b.x1) / 2, (b.y0 + b.y1) / 2, "middle", 14, COLOR_MUTED, "out of memory");
    draw_x_axis(f, &b, &ax);
    draw_axis_labels(f, &b, c->height, c->x_label, c->y_label);
    draw_legend(f, c, &b, &ax, &ay, buf);
    fputs("</svg>\n", f);
    free(buf);
}

/* --- histogram ------------------------------------------------------------- */

/* Bin width: a 1-2-2.5-5 multiple of a power of ten near span / bins. */
static double bin_width(double span, int bins) {
    double raw = span / bins;
    double e = floor(log10(raw)), m = raw / pow(10, e);
    double nice = m < 1.5 ? 1 : m < 2.25 ? 2 : m < 3.5 ? 2.5 : m < 7.5 ? 5 : 10;
    return nice * pow(10, e);
}

static void fmt_signed(char *buf, size_t cap, double v, const char *unit) {
    snprintf(buf, cap, "%+.2f%s%s", fabs(v) < 5e-3 ? 0.0 : v, unit && unit[0] ? " " : "", unit ? unit : "");
}

void st_svg_histogram(FILE *f, const char *title, const char *x_label, const char *unit, const double *v, int n,
                      int width, int height, const char *empty) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int m = 0;
    for (int i = 0; v && i < n; i++) {
        if (!st_svg_ok(v[i])) continue;
        lo = fmin(lo, v[i]);
        hi = fmax(hi, v[i]);
        sum += v[i];
        m++;
    }
    if (m == 0) {
        svg_empty(f, width, height, title, empty);
        return;
    }
    double mean = sum / m;
    /* Keep 0 in view: the split between losers and winners is the point. */
    lo = fmin(lo, 0);
    hi = fmax(hi, 0);
    if (!(hi > lo)) hi = lo + 1;
    int target = (int)fmin(40, fmax(8, ceil(sqrt((double)m))));
    double w = bin_width(hi - lo, target);
    double first = floor(lo / w);
    int nb = (int)fmin(400, floor(hi / w) - first + 1);
    int *count = calloc((size_t)nb, sizeof *count);
    if (!count) {
        svg_empty(f, width, height, title, "out of memory");
        return;
    }
    int maxc = 0;
    for (int i = 0; i < n; i++) {
        if (!st_svg_ok(v[i])) continue;
        int k = (int)(floor(v[i] / w) - first);
        k = k < 0 ? 0 : k >= nb ? nb - 1 : k;
        if (++count[k] > maxc) maxc = count[k];
    }
    double e0 = first * w, e1 = (first + nb) * w;
    box b = {56, width - 16.0, 34, height - (x_label ? 40.0 : 26.0)};
    /* No padding: the bars fill the plot; ticks still fall on nice steps. */
    axis ax = axis_make(e0, e1, (int)((b.x1 - b.x0) / 70), 0, 0);
    axis ay = axis_make(0, maxc * 1.15, 5, 0, 1); /* headroom for the mean's label */
    char stats[160], ms[48];
    fmt_signed(ms, sizeof ms, mean, unit);
    int wins = 0;
    for (int i = 0; i < n; i++)
        wins += st_svg_ok(v[i]) && v[i] > 0;
    snprintf(stats, sizeof stats, "%d trade%s, mean %s, %.0f%% winners", m, m == 1 ? "" : "s", ms, 100.0 * wins / m);
    svg_open(f, width, height, title);
    svg_text(f, b.x1, 20, "end", FONT_TICK, COLOR_MUTED, stats);
    draw_y_axis(f, &b, &ay);
    for (int k = 0; k < nb; k++) {
        if (count[k] == 0) continue;
        double l = (first + k) * w, r = l + w;
        double x0 = axis_map(&ax, l, b.x0, b.x1), x1 = axis_map(&ax, r, b.x0, b.x1);
        double y = axis_map(&ay, count[k], b.y1, b.y0);
        svg_rect(f, x0 + 0.5, y, x1 - x0 - 1, b.y1 - y, r <= 0 ? COLOR_NEG : COLOR_POS);
        fprintf(f, " fill-opacity=\"0.8\"><title>[%.4g, %.4g): %d</title></rect>\n", fabs(l) < w * 1e-9 ? 0 : l,
                fabs(r) < w * 1e-9 ? 0 : r, count[k]);
    }
    double x_zero = axis_map(&ax, 0, b.x0, b.x1), x_mean = axis_map(&ax, mean, b.x0, b.x1);
    svg_line(f, x_zero, b.y0, x_zero, b.y1, COLOR_TEXT, 1.2, NULL);
    svg_line(f, x_mean, b.y0, x_mean, b.y1, COLOR_MEAN, 1.6, "5 3");
    char ml[64];
    snprintf(ml, sizeof ml, "mean %s", ms);
    int right = x_mean > (b.x0 + b.x1) / 2;
    svg_text_halo(f, x_mean + (right ? -4 : 4), b.y0 + 12, right ? "end" : "start", FONT_TICK, COLOR_MEAN, ml);
    draw_x_axis(f, &b, &ax);
    draw_axis_labels(f, &b, height, x_label, "trades");
    fputs("</svg>\n", f);
    free(count);
}

/* --- horizontal bars ------------------------------------------------------- */

typedef struct {
    double v;
    int i;
} ranked;

/* Descending by value, non-finite last, ties in original order. */
static int cmp_desc(const void *a, const void *b) {
    const ranked *p = a, *q = b;
    int op = st_svg_ok(p->v), oq = st_svg_ok(q->v);
    if (op != oq) return oq - op;
    if (op && p->v != q->v) return p->v < q->v ? 1 : -1;
    return p->i - q->i;
}

/* Copies at most max_chars characters of s (UTF-8 aware, so a multi-byte
 * character is never cut), adding "..." when shortened. */
static void clip_label(char *out, size_t cap, const char *s, int max_chars) {
    size_t o = 0;
    int chars = 0;
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if ((*p & 0xC0) != 0x80 && chars++ == max_chars) {
            snprintf(out + o, cap - o, "...");
            return;
        }
        if (o + 4 >= cap) break;
        out[o++] = (char)*p;
    }
    out[o] = '\0';
}

void st_svg_hbars(FILE *f, const char *title, const char *const *label, const double *v, int n, int width,
                  int uniform_line, const char *empty) {
    ranked *order = n > 0 && v ? malloc(sizeof(ranked) * (size_t)n) : NULL;
    double vmax = 0, vmin = 0;
    int ok = 0;
    for (int i = 0; order && i < n; i++) {
        order[i] = (ranked){v[i], i};
        if (!st_svg_ok(v[i])) continue;
        vmax = fmax(vmax, v[i]);
        vmin = fmin(vmin, v[i]);
        ok++;
    }
    if (ok == 0) {
        svg_empty(f, width, 200, title, empty);
        free(order);
        return;
    }
    qsort(order, (size_t)n, sizeof *order, cmp_desc);
    const double row = 18;
    int height = (int)(60 + row * n);
    size_t longest = 3;
    for (int i = 0; label && i < n; i++) {
        size_t l = label[i] ? strlen(label[i]) : 0;
        longest = l > longest ? l : longest;
    }
    /* Room for the longest label (clipped at 26 characters) and the values. */
    double left = 18 + 6.6 * (double)(longest < 29 ? longest : 29);
    box b = {left, width - 60.0, 40, height - 26.0};
    double top = uniform_line && vmin >= 0 ? fmax(vmax, 1.0 / n) : vmax;
    if (top == 0 && vmin == 0) top = 1; /* all zero: bars of width 0 from the left edge */
    axis ax = axis_make(vmin, top, 5, 0, 0);
    svg_open(f, width, height, title);
    double t[64];
    char lab[48], name[160];
    int nt = axis_ticks(&ax, t, 64);
    for (int i = 0; i < nt; i++) {
        double x = axis_map(&ax, t[i], b.x0, b.x1);
        svg_line(f, x, b.y0 - 4, x, b.y1, COLOR_GRID, 1, NULL);
        tick_label(lab, sizeof lab, &ax, t[i]);
        svg_text(f, x, b.y1 + 16, "middle", FONT_TICK, COLOR_AXIS, lab);
    }
    double x_zero = axis_map(&ax, fmax(0, ax.lo), b.x0, b.x1);
    for (int r = 0; r < n; r++) {
        int i = order[r].i;
        double y = b.y0 + r * row;
        clip_label(name, sizeof name, label ? label[i] : NULL, 26);
        svg_text(f, b.x0 - 6, y + 12, "end", FONT_TICK, COLOR_TEXT, name);
        if (!st_svg_ok(v[i])) {
            svg_text(f, b.x0 + 4, y + 12, "start", FONT_TICK, COLOR_MUTED, "n/a");
            continue;
        }
        double x = axis_map(&ax, v[i], b.x0, b.x1);
        svg_rect(f, fmin(x, x_zero), y + 2, fabs(x - x_zero), row - 4, COLOR_BAR);
        fputs("><title>", f);
        st_xml_escape(f, label ? label[i] : "");
        fprintf(f, ": %.4g</title></rect>\n", v[i]);
        snprintf(lab, sizeof lab, "%.3f", v[i]);
        svg_text_halo(f, fmax(x, x_zero) + 4, y + 12, "start", FONT_TICK - 1, COLOR_MUTED, lab);
    }
    if (uniform_line && vmin >= 0) {
        double x = axis_map(&ax, 1.0 / n, b.x0, b.x1);
        svg_line(f, x, b.y0 - 4, x, b.y1, COLOR_NEG, 1.2, "4 3");
        int near_right = x > b.x1 - 70;
        svg_text(f, x + (near_right ? -3 : 3), b.y0 - 8, near_right ? "end" : "start", FONT_TICK - 1, COLOR_NEG,
                 "uniform 1/F");
    }
    svg_line(f, x_zero, b.y0 - 4, x_zero, b.y1, COLOR_AXIS, 1, NULL);
    fputs("</svg>\n", f);
    free(order);
}
