/* err.h: the error context every libcuco function fills when it fails.
 *
 * Functions return 0 on success or a negative CUCO_E* code, and describe the
 * failure in a struct cuco_err passed by the caller. When the failure is about
 * an input file, the error carries its path and line so the CLI can print
 * "file:line: message". Callers add context on the way up with
 * cuco_err_prefix(). The struct owns its strings; cuco_err_clear() frees them.
 */
#ifndef CUCO_ERR_H
#define CUCO_ERR_H

#include <stdio.h>

enum cuco_errcode {
    CUCO_OK = 0,
    CUCO_EINVAL = -1,        /* bad input: manifest, arguments, program text */
    CUCO_EIO = -2,           /* file system or pipe failure */
    CUCO_ENOMEM = -3,        /* allocation failed */
    CUCO_ESYS = -4,          /* a system call failed (errno in the message) */
    CUCO_ENOTFOUND = -5,     /* a named thing does not exist */
    CUCO_EBUSY = -6,         /* held by someone else (run lock, database) */
    CUCO_EDB = -7,           /* SQLite error */
    CUCO_ENET = -8,          /* network / HTTP error */
    CUCO_EBUDGET = -9,       /* a budget would be exceeded */
    CUCO_EUNSUPPORTED = -10, /* valid request this build or machine cannot do */
};

typedef struct cuco_err {
    int code;   /* last code set, 0 when clear */
    char *msg;  /* owned; NULL when clear */
    char *file; /* owned; input file the error is about, or NULL */
    int line;   /* 1-based line in file, 0 when unknown */
} cuco_err;

#define CUCO_ERR_INIT                                                                              \
    {                                                                                              \
        0, NULL, NULL, 0                                                                           \
    }

/* Sets the error (replacing any previous one) and returns code. */
int cuco_err_set(cuco_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, with the input file and line the error is about. */
int cuco_err_set_at(cuco_err *e, int code, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Sets the error from errno: "<what>: strerror(errno)". Returns CUCO_ESYS. */
int cuco_err_errno(cuco_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepends "context: " to the message; returns e->code. */
int cuco_err_prefix(cuco_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees the strings and resets to clear. */
void cuco_err_clear(cuco_err *e);
/* Prints "file:line: msg\n" (or "msg\n") with a prefix such as "cuco eval". */
void cuco_err_print(const cuco_err *e, const char *prefix, FILE *out);
/* Returns the message or "(no error)". */
const char *cuco_err_msg(const cuco_err *e);

#endif
