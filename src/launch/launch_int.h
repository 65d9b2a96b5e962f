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

/* Appends the NULL-terminated list to out as owned strings. */
int launch_strv_count(const char *const *v);

#endif
