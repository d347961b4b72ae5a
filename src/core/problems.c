/* problems.c: the problem list of problems.h. */
#include "core/problems.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static void add_line(st_problem_list *p, const char *line) {
    size_t need = strlen(line) + (p->n ? 1 : 0);
    if (p->len + need + 40 >= sizeof p->text) { /* room kept for the "(and N more problems)" line */
        p->hidden++;
        return;
    }
    p->len += (size_t)snprintf(p->text + p->len, sizeof p->text - p->len, "%s%s", p->n ? "\n" : "", line);
    p->n++;
}

void st_problem_add(st_problem_list *p, const char *fmt, ...) {
    char line[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    add_line(p, line);
}

void st_problem_add_last_error(st_problem_list *p) {
    const char *m = st_last_error(), *c = strstr(m, ": ");
    if (c && c[-1] >= '0' && c[-1] <= '9' && !memchr(m, ' ', (size_t)(c - m))) m = c + 2;
    while (*m) {
        const char *e = strchr(m, '\n');
        size_t n = e ? (size_t)(e - m) : strlen(m);
        char line[300];
        snprintf(line, sizeof line, "%.*s", (int)n, m);
        add_line(p, line);
        m += n + (e ? 1 : 0);
    }
}

int st_problem_status(st_problem_list *p) {
    if (p->hidden) snprintf(p->text + p->len, sizeof p->text - p->len, "\n(and %d more problems)", p->hidden);
    return p->n ? ST_FAIL(ST_ERR_INPUT, "%s", p->text) : ST_OK;
}
