/* launch_int.h: what the launcher implementations (local.c, slurm.c) share
 * behind the opaque struct of include/cuco/launch.h. Not installed. */
#ifndef CUCO_LAUNCH_INT_H
#define CUCO_LAUNCH_INT_H

#include "cuco/buf.h"
#include "cuco/launch.h"

struct cuco_launcher {
    const char *name; /* static string */
    int slots;        /* runs at once (0: unlimited) */
    int (*run)(const cuco_launcher *l, const cuco_launch_job *job, cuco_launch_result *r,
               cuco_err *e);
    void (*destroy)(cuco_launcher *l); /* frees impl */
    void *impl;
};

/* Sends one formatted line to job->progress when there is one. */
void launch_progress(const cuco_launch_job *job, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Entries of a NULL-terminated list (0 for NULL). */
int launch_strv_count(const char *const *v);

/* A list of words (GPU names, sbatch flags); owned strings. */
typedef struct launch_words {
    char **v;
    size_t n;
} launch_words;

void launch_words_free(launch_words *w);
/* Appends [p, p+n) as a new word; CUCO_ENOMEM when memory runs out. */
int launch_words_push(launch_words *w, const char *p, size_t n);
/* Appends the blank-separated words of text (no quoting: sbatch flags such
 * as --account=x); CUCO_ENOMEM when memory runs out. */
int launch_words_split(const char *text, launch_words *w);

#endif
