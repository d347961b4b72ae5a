/* problems.h: validation that names every problem, not just the first.
 *
 * A validator adds one line per problem to an st_problem_list and returns
 * st_problem_status(), which is ST_OK when there is none and otherwise one
 * ST_ERR_INPUT error whose message is the lines joined by newlines (what
 * does not fit in one message is counted: "(and N more problems)"). The CLI
 * prints such a message one line each (cli/run_setup.h). */
#ifndef ST_PROBLEMS_H
#define ST_PROBLEMS_H

#include <stddef.h>

typedef struct {
    char text[940];
    size_t len;
    int n, hidden;
} st_problem_list;

void st_problem_add(st_problem_list *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds the lines of the last error (core/error.h), its leading "src/file.c:LINE: " dropped. */
void st_problem_add_last_error(st_problem_list *p);
int st_problem_status(st_problem_list *p);

#endif
