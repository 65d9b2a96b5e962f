/* exports.h: the functions a built program exports to the shared libraries
 * it loads (src/eval, not installed). */
#ifndef CUCO_EVAL_EXPORTS_H
#define CUCO_EVAL_EXPORTS_H

#include "cuco/confine.h"
#include "cuco/err.h"
#include "cuco/workload.h"

/* Appends to out the functions the executable bin defines and exports in its
 * dynamic symbol table (nm -D, run under confine) whose identifier is not
 * that of a function the text `reference` defines (the frozen reference, whose
 * own build may export its functions under -rdynamic). Each one is a
 * function a shared library would call in place of its own. 0, or an error
 * naming nm (not found, failed) or CUCO_ENOMEM. */
int eval_foreign_exports(const char *bin, const char *reference, const cuco_confine *confine,
                         cuco_strlist *out, cuco_err *e);

#endif
