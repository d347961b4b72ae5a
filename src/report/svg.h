/* svg.h: inline SVG charts for the HTML report (report/html.c).
 *
 * Three chart kinds, each written as one <svg> element with a title, axes,
 * tick labels and, where several series share a plot, a legend: line charts
 * (optionally an area down to y = 0), a histogram, and a horizontal bar
 * chart. Every chart copes with bad data the same way:
 *   - NaN, +-Inf and |v| > ST_SVG_MAX_ABS are skipped (a line breaks there),
 *     so no coordinate is ever written from a non-finite number;
 *   - a constant series gets a small range around its value;
 *   - a polyline over more than ST_SVG_MAX_POINTS samples is reduced to the
 *     min and max of ST_SVG_MAX_POINTS/2 buckets (extremes such as the worst
 *     drawdown survive);
 *   - with nothing to draw the frame says so (e.g. "no trades").
 * Every string is XML-escaped. Sizes are viewBox units; CSS scales them. */
#ifndef ST_SVG_H
#define ST_SVG_H

#include <stdio.h>

#define ST_SVG_MAX_POINTS 2000
/* Values beyond this are treated as missing: no chart scale can show them
 * next to ordinary values, and they keep every range computation finite. */
#define ST_SVG_MAX_ABS 1e300

typedef struct {
    const char *name; /* legend label; NULL: not in the legend */
    const double *x;  /* [n] x values, or NULL for x = 0..n-1 */
    const double *y;  /* [n] */
    int n;
    const char *color; /* CSS colour */
    int dashed;        /* draw dashed (baselines, reference series) */
    double opacity;    /* stroke opacity; 0 means 1 */
} st_svg_series;

typedef struct {
    const char *title, *x_label, *y_label;
    int width, height;
    const st_svg_series *series;
    int n_series;
    int area;    /* fill series 0 between its curve and y = 0 */
    int has_ref; /* draw a dashed horizontal line at y = ref */
    double ref;
    int x_integer;     /* x ticks at whole numbers (bars, updates) */
    const char *empty; /* text shown when there is no finite point */
} st_svg_line_chart;

void st_svg_line(FILE *f, const st_svg_line_chart *c);

/* Histogram of v[n] with nice bin edges aligned on 0; bars left of 0 in red,
 * right of it in green; vertical lines at 0 and at the mean. unit follows
 * numbers in labels (e.g. "R"); empty is shown when v has no finite entry. */
void st_svg_histogram(FILE *f, const char *title, const char *x_label, const char *unit, const double *v, int n,
                      int width, int height, const char *empty);

/* Horizontal bars of v[n] labelled label[n], sorted descending (non-finite
 * values last, shown as "n/a"). uniform_line: a dashed line at 1/n, the
 * weight every variable would get from an indifferent selection network. */
void st_svg_hbars(FILE *f, const char *title, const char *const *label, const double *v, int n, int width,
                  int uniform_line, const char *empty);

/* Writes s with & < > " ' escaped; NULL writes nothing. */
void st_xml_escape(FILE *f, const char *s);

/* Is v drawable: finite and within ST_SVG_MAX_ABS. */
int st_svg_ok(double v);

#endif
