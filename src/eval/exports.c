/* exports.c: the functions a built program hands to the shared libraries it
 * loads. An executable's dynamic symbol table holds a function it defines
 * only when a shared library on its link line refers to that name (or the
 * build exports everything, -rdynamic): the loader then binds the library's
 * calls to the executable's definition. A candidate that defines
 * clock_gettime, send or malloc this way replaces the C library's, MPI's or
 * CUDA's own under the frozen timing and verification, without naming
 * anything the frozen text names. */
#include "exports.h"

#include "cuco/buf.h"
#include "cuco/patch.h"
#include "cuco/proc.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* The identifier a symbol stands for: a C name as it is; an Itanium-mangled
 * C++ name (_Z...) its last source name (_ZN2ns3fooEv -> foo, _Z3barii ->
 * bar); an operator or a name it cannot read, the symbol itself. */
static char *symbol_base(const char *sym)
{
    if (strncmp(sym, "_Z", 2) != 0)
        return cuco_strdup(sym);
    const char *p = sym + 2, *last = NULL;
    size_t last_len = 0;
    if (*p == 'N')
        p++;
    while (*p && isdigit((unsigned char)*p)) {
        size_t n = strtoul(p, (char **)&p, 10);
        if (strlen(p) < n)
            break;
        last = p;
        last_len = n;
        p += n;
    }
    return last ? cuco_strndup(last, last_len) : cuco_strdup(sym);
}

/* Whether a mangled name is in namespace std (St, or one of the
 * abbreviations Sa Sb Ss Si So Sd) or __gnu_cxx: a weak one is the
 * program's copy of a standard template that the C++ library instantiates
 * too (std::string's members), the same code from the same headers. */
static int in_std(const char *sym)
{
    if (strncmp(sym, "_Z", 2) != 0)
        return 0;
    const char *p = sym + 2;
    if (*p == 'N')
        for (p++; *p == 'K' || *p == 'V' || *p == 'r'; p++)
            ;
    return (p[0] == 'S' && p[1] && strchr("tabsiod", p[1])) || strncmp(p, "9__gnu_cxx", 10) == 0;
}

/* One line of `nm -P`: "NAME TYPE [VALUE [SIZE]]". Appends NAME to out when
 * TYPE is a function's (T text, W weak, i indirect), it is not a weak
 * standard template, and its identifier is not one the reference defines. */
static int take_line(const char *line, size_t len, const cuco_strlist *allowed, cuco_strlist *out)
{
    const char *sp = memchr(line, ' ', len);
    if (!sp || sp + 1 >= line + len)
        return 0;
    char type = sp[1];
    if (type != 'T' && type != 'W' && type != 'i')
        return 0;
    char *name = cuco_strndup(line, (size_t)(sp - line));
    if (name && type == 'W' && in_std(name)) {
        free(name);
        return 0;
    }
    char *at = name ? strchr(name, '@') : NULL; /* name@VERSION */
    if (at)
        *at = '\0';
    char *base = name ? symbol_base(name) : NULL;
    int rc = !name || !base ? CUCO_ENOMEM : 0;
    if (!rc && !cuco_strlist_has(allowed, base) && !cuco_strlist_has(out, name))
        rc = cuco_strlist_push(out, name);
    free(base);
    free(name);
    return rc;
}

int eval_foreign_exports(const char *bin, const char *reference, const cuco_confine *confine,
                         cuco_strlist *out, cuco_err *e)
{
    cuco_strlist allowed = {0};
    int rc = cuco_patch_defined_functions(reference, &allowed, e);
    if (rc)
        return rc;
    const char *argv[] = {"nm", "-D", "--defined-only", "-P", bin, NULL};
    cuco_proc_opts po = {.argv = argv, .timeout_s = 60, .confine = confine};
    cuco_proc_result pr;
    rc = cuco_proc_run(&po, &pr, e);
    if (rc) {
        cuco_strlist_free(&allowed);
        return cuco_err_prefix(e, "listing the program's exported symbols (nm)");
    }
    if (!pr.exited || pr.exit_code != 0)
        rc = cuco_err_set(e, CUCO_EIO, "nm -D %s failed: %s", bin,
                          pr.err && *pr.err ? pr.err : "no output");
    for (const char *p = pr.out; !rc && p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        rc = take_line(p, len, &allowed, out);
        if (rc)
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        p += len + (nl ? 1 : 0);
    }
    cuco_proc_result_free(&pr);
    cuco_strlist_free(&allowed);
    return rc;
}
