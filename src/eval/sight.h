/* sight.h: what a candidate's confined build and runs may read (src/eval,
 * not installed). Everything outside the hidden folders stays readable; in
 * them (the user's home, cuco's tree, the folder cuco runs in) only the
 * visible folders are bound back: the workload, the folders its build
 * command and run environment name (-I, -L, absolute paths,
 * LD_LIBRARY_PATH), and cuco's device library and workloads (cuco-vouch-exec
 * is copied into the build folder). */
#ifndef CUCO_EVAL_SIGHT_H
#define CUCO_EVAL_SIGHT_H

#include "cuco/workload.h"

typedef struct eval_sight {
    cuco_strlist hidden, visible; /* owned paths */
    const char **hidden_view;     /* NULL-terminated views of the lists, for cuco_confine */
    const char **visible_view;
} eval_sight;

/* Starts with the hidden folders and the visible ones every evaluation of
 * workload w needs (repo: cuco's tree). 0 or CUCO_ENOMEM. */
int eval_sight_init(eval_sight *s, const cuco_workload *w, const char *repo);
/* Adds the folders named by the words of a command (-I/-L/-isystem paths,
 * absolute paths: a file's folder). */
int eval_sight_add_args(eval_sight *s, const cuco_strlist *args);
/* Adds the folders of PATH-like values ("LD_LIBRARY_PATH=a:b") in env. */
int eval_sight_add_env(eval_sight *s, const cuco_strlist *env);
int eval_sight_add(eval_sight *s, const char *dir);
void eval_sight_free(eval_sight *s);

#endif
