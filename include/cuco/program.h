/* program.h: the text of a candidate program: its EVOLVE-BLOCKs, the frozen
 * text around them, and the knobs declared inside them.
 *
 *   // EVOLVE-BLOCK-START
 *   #define CUCO_CHUNK_BYTES 1048576  // cuco:knob 65536 262144 1048576 4194304
 *   ...
 *   // EVOLVE-BLOCK-END
 *
 * A marker is a line whose trimmed text starts with "//" and contains
 * "EVOLVE-BLOCK-START" or "EVOLVE-BLOCK-END". Blocks do not nest. A knob is a
 * "#define NAME VALUE" line inside a block with a trailing
 * "// cuco:knob V1 V2 ..." comment listing its legal values.
 *
 * A run knob ("// cuco:knob run V1 V2 ...", integer values) is one whose
 * macro is used only in run-time expressions: the evaluation builds the
 * program once for all its values and passes the value in the environment
 * (cuco_program_stage_run_knobs), so that a new value needs no rebuild.
 */
#ifndef CUCO_PROGRAM_H
#define CUCO_PROGRAM_H

#include "cuco/err.h"
#include "cuco/workload.h"
#include <stddef.h>

typedef struct cuco_block {
    size_t body_start; /* byte offset of the first byte after the START marker line */
    size_t body_end;   /* byte offset of the first byte of the END marker line */
    int start_line;    /* 1-based line of the START marker */
    int end_line;      /* 1-based line of the END marker */
} cuco_block;

/* Finds the blocks. Unbalanced or nested markers: CUCO_EINVAL with the line.
 * *blocks is malloc'd (caller frees); a program without blocks yields n = 0. */
int cuco_program_blocks(const char *text, cuco_block **blocks, size_t *n, cuco_err *e);

/* 0 if cand's text outside its blocks equals seed's (same number of blocks,
 * same frozen text byte for byte); otherwise CUCO_EINVAL and a message naming
 * the first differing line of cand. */
int cuco_program_check_frozen(const char *seed, const char *cand, cuco_err *e);

typedef struct cuco_knob {
    char *name;  /* macro name */
    char *value; /* current value text */
    cuco_strlist choices;
    int line;             /* 1-based */
    int value_in_choices; /* 0: the current value is not one of choices (kept, warned) */
    int run;              /* 1: a run knob whose value and choices are all integers */
    size_t value_off;     /* where the value is in the text */
    size_t value_len;
    cuco_strlist when; /* "NAME=V1,V2" each: the knob matters only while every one
                          holds ("... // cuco:knob 0 8 16 when CUCO_COPY_ENGINE=0") */
} cuco_knob;

/* Knobs inside the blocks, in order. *knobs malloc'd: cuco_knobs_free(). */
int cuco_program_knobs(const char *text, cuco_knob **knobs, size_t *n, cuco_err *e);
void cuco_knobs_free(cuco_knob *knobs, size_t n);
/* The text to build for a program with run knobs: each run knob's value
 * becomes cuco_run_knob("CUCO_KNOB_<NAME>", <its first choice>), which reads
 * the environment, after a prelude that defines it (a #line directive keeps
 * the program's line numbers), so that programs differing only in run-knob
 * values build to the same binary. env gets one "CUCO_KNOB_<NAME>=<value>"
 * per run knob, for every run of that binary. *staged is NULL when the
 * program has no run knob. Caller frees *staged and env. */
int cuco_program_stage_run_knobs(const char *text, char **staged, cuco_strlist *env, cuco_err *e);
/* Returns a new text with knob name set to value (caller frees). */
int cuco_program_set_knob(const char *text, const char *name, const char *value, char **out,
                          cuco_err *e);

#endif
