/* launcher.c: what every launcher shares behind include/cuco/launch.h:
 * the opaque struct's accessors, results, progress lines, shell quoting and
 * word lists. The launchers (local.c, slurm.c) build on it; launch.c, above
 * them, chooses one. */
#include "launch_int.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void launch_progress(const cuco_launch_job *job, const char *fmt, ...)
{
    if (!job->progress)
        return;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    job->progress(job->progress_ctx, cuco_buf_str(&b));
    cuco_buf_free(&b);
}

int launch_strv_count(const char *const *v)
{
    int n = 0;
    while (v && v[n])
        n++;
    return n;
}

char *cuco_launch_shell_quote(const char *word)
{
    cuco_buf b = CUCO_BUF_INIT;
    cuco_buf_putc(&b, '\'');
    for (const char *p = word ? word : ""; *p; p++) {
        if (*p == '\'')
            cuco_buf_puts(&b, "'\\''");
        else
            cuco_buf_putc(&b, *p);
    }
    cuco_buf_putc(&b, '\'');
    return cuco_buf_detach(&b);
}

const char *cuco_launcher_name(const cuco_launcher *l)
{
    return l ? l->name : "local";
}

int cuco_launcher_slots(const cuco_launcher *l)
{
    return l ? l->slots : 1;
}

void cuco_launch_result_free(cuco_launch_result *r)
{
    if (!r)
        return;
    cuco_proc_result_free(&r->proc);
    free(r->infra_reason);
    free(r->job_id);
    memset(r, 0, sizeof *r);
}

void cuco_launcher_free(cuco_launcher *l)
{
    if (!l)
        return;
    if (l->destroy)
        l->destroy(l);
    free(l);
}

void launch_words_free(launch_words *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->v[i]);
    free(g->v);
    g->v = NULL;
    g->n = 0;
}

int launch_words_push(launch_words *out, const char *p, size_t n)
{
    char *item = cuco_strndup(p, n);
    char **grown = item ? realloc(out->v, (out->n + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(item);
        return CUCO_ENOMEM;
    }
    out->v = grown;
    out->v[out->n++] = item;
    return 0;
}

int launch_words_split(const char *text, launch_words *out)
{
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n')
            p++;
        if (!*p)
            return 0;
        size_t n = strcspn(p, " \t\n");
        if (launch_words_push(out, p, n) < 0)
            return CUCO_ENOMEM;
        p += n;
    }
}
