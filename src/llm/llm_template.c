/* llm_template.c: prompt templates. Prompts live as files under
 * src/llm/prompts/ (embedded into the binary) rather than as C strings, so
 * they can be read and changed as text; this file fills their "{{name}}"
 * placeholders and "{{#name}}...{{/name}}" sections, strictly: a name the
 * caller did not provide is an error, never a silent blank. */
#include "cuco/llm.h"

#include <stdlib.h>
#include <string.h>

#include "cuco/embedded.h"
#include "cuco/fs.h"

static const cuco_llm_var *var_find(const cuco_llm_var *vars, size_t n, const char *name,
                                    size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(vars[i].name) == len && !strncmp(vars[i].name, name, len))
            return &vars[i];
    return NULL;
}

static int line_of(const char *start, const char *at)
{
    int line = 1;
    for (const char *p = start; p < at; p++)
        if (*p == '\n')
            line++;
    return line;
}

/* Fills tmpl[0..end) into out. */
static int fill_range(const char *base, const char *p, const char *end, const char *tmpl_name,
                      const cuco_llm_var *vars, size_t n_vars, cuco_buf *out, cuco_err *e)
{
    while (p < end) {
        const char *open = strstr(p, "{{");
        if (!open || open >= end) {
            cuco_buf_append(out, p, (size_t)(end - p));
            return 0;
        }
        cuco_buf_append(out, p, (size_t)(open - p));
        const char *close = strstr(open + 2, "}}");
        if (!close || close >= end)
            return cuco_err_set_at(e, CUCO_EINVAL, tmpl_name, line_of(base, open), "unclosed '{{'");
        char kind = open[2];
        const char *name = open + 2;
        if (kind == '#' || kind == '^' || kind == '/')
            name++;
        size_t len = (size_t)(close - name);
        const cuco_llm_var *v = var_find(vars, n_vars, name, len);
        if (!v)
            return cuco_err_set_at(e, CUCO_EINVAL, tmpl_name, line_of(base, open),
                                   "unknown placeholder '%.*s'", (int)len, name);
        int empty = !v->value || !*v->value;
        if (kind == '/')
            return cuco_err_set_at(e, CUCO_EINVAL, tmpl_name, line_of(base, open),
                                   "'{{/%.*s}}' without its opening section", (int)len, name);
        if (kind == '#' || kind == '^') {
            /* find the matching close tag (sections of the same name do not nest) */
            char *tag = cuco_sprintf("{{/%.*s}}", (int)len, name);
            const char *sec_end = tag ? strstr(close + 2, tag) : NULL;
            size_t tag_len = tag ? strlen(tag) : 0;
            free(tag);
            if (!sec_end || sec_end >= end)
                return cuco_err_set_at(e, CUCO_EINVAL, tmpl_name, line_of(base, open),
                                       "section '%.*s' is not closed", (int)len, name);
            int keep = kind == '#' ? !empty : empty;
            if (keep) {
                int rc = fill_range(base, close + 2, sec_end, tmpl_name, vars, n_vars, out, e);
                if (rc)
                    return rc;
            }
            p = sec_end + tag_len;
            continue;
        }
        if (!empty)
            cuco_buf_puts(out, v->value);
        p = close + 2;
    }
    return 0;
}

int cuco_llm_template_fill(const char *tmpl, const char *tmpl_name, const cuco_llm_var *vars,
                           size_t n_vars, cuco_buf *out, cuco_err *e)
{
    if (!tmpl)
        return cuco_err_set(e, CUCO_EINVAL, "no template");
    return fill_range(tmpl, tmpl, tmpl + strlen(tmpl), tmpl_name ? tmpl_name : "template", vars,
                      n_vars, out, e);
}

static int load_embedded(const char *dir, const char *name, const char *env_dir, char **text,
                         cuco_err *e)
{
    if (!name || !*name || strchr(name, '/'))
        return cuco_err_set(e, CUCO_EINVAL, "bad template name '%s'", name ? name : "");
    const char *override = env_dir ? getenv(env_dir) : NULL;
    if (override && *override) {
        char *path = cuco_path_join(override, name);
        int rc = path ? cuco_fs_read(path, text, NULL, e) : cuco_err_set(e, CUCO_ENOMEM, "oom");
        free(path);
        return rc;
    }
    char *key = cuco_sprintf("%s/%s", dir, name);
    size_t size = 0;
    const unsigned char *data = key ? cuco_embedded_find(key, &size) : NULL;
    free(key);
    if (!data)
        return cuco_err_set(e, CUCO_ENOTFOUND, "%s/%s is not built into this binary", dir, name);
    *text = cuco_strndup((const char *)data, size);
    return *text ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

int cuco_llm_template_load(const char *name, char **text, cuco_err *e)
{
    return load_embedded("src/llm/prompts", name, "CUCO_PROMPTS_DIR", text, e);
}

int cuco_llm_context_load(const char *name, char **text, cuco_err *e)
{
    return load_embedded("docs/context", name, NULL, text, e);
}
