/* llm_meta.c: the run's meta summary, the short "what worked, what failed"
 * text fed to later prompts. With an LLM it is written by a model from the
 * meta.md prompt built here; without one (the offline knob mutator, or no
 * budget left) a rule-based summary stands in: counts per status, the best
 * programs and their knob settings, the knob values that scored best on
 * average, and the failure lines seen most often. */
#include "cuco/llm.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct tally {
    char *key;
    long count;
    double sum;
};

struct tallies {
    struct tally *items;
    size_t n;
};

static struct tally *tally_get(struct tallies *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->items[i].key, key))
            return &t->items[i];
    struct tally *grown = realloc(t->items, (t->n + 1) * sizeof *grown);
    if (!grown)
        return NULL;
    t->items = grown;
    struct tally *it = &t->items[t->n];
    it->key = cuco_strdup(key);
    if (!it->key)
        return NULL;
    it->count = 0;
    it->sum = 0;
    t->n++;
    return it;
}

static void tallies_free(struct tallies *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->items[i].key);
    free(t->items);
    t->items = NULL;
    t->n = 0;
}

static int by_count_desc(const void *a, const void *b)
{
    const struct tally *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* The line of an excerpt that names the failure: the first one mentioning
 * "error" (compilers), else "FAIL" (verification), else the last non-empty
 * line. Caller frees. */
static char *failure_line(const char *excerpt)
{
    const char *picked = NULL;
    size_t picked_len = 0;
    const char *last = NULL;
    size_t last_len = 0;
    static const char *const keys[] = {"error", "FAIL", "Error", "timed out", "Assertion"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && !picked; k++) {
        const char *hit = strstr(excerpt, keys[k]);
        if (hit) {
            const char *ls = hit;
            while (ls > excerpt && ls[-1] != '\n')
                ls--;
            const char *le = strchr(hit, '\n');
            picked = ls;
            picked_len = le ? (size_t)(le - ls) : strlen(ls);
        }
    }
    if (!picked) {
        for (const char *p = excerpt; *p;) {
            const char *le = strchr(p, '\n');
            size_t len = le ? (size_t)(le - p) : strlen(p);
            if (len > 0)
                last = p, last_len = len;
            p += len + (le ? 1 : 0);
        }
        picked = last;
        picked_len = last_len;
    }
    if (!picked)
        return NULL;
    if (picked_len > 200)
        picked_len = 200;
    char *line = cuco_strndup(picked, picked_len);
    if (!line)
        return NULL;
    /* a path prefix such as "/tmp/build-xyz/main.c:12:5: " differs between
     * candidates: keep from the last ": " before "error" so lines group */
    char *err = strstr(line, "error");
    if (err) {
        char *cut = NULL;
        for (char *p = line; p && p < err; p = strstr(p + 1, ": "))
            if (p != line)
                cut = p;
        if (cut && cut < err) {
            char *rest = cuco_strdup(cut + 2);
            free(line);
            line = rest;
        }
    }
    if (line)
        cuco_str_trim(line);
    return line;
}

int cuco_meta_summary_rules(const cuco_meta_entry *entries, size_t n, cuco_buf *out, cuco_err *e)
{
    struct tallies status = {NULL, 0}, knob_values = {NULL, 0}, failures = {NULL, 0};
    int rc = 0;
    size_t best[3] = {0, 0, 0};
    size_t n_best = 0;
    for (size_t i = 0; i < n; i++) {
        const cuco_meta_entry *m = &entries[i];
        const char *st = m->status ? m->status : "unknown";
        struct tally *t = tally_get(&status, st);
        if (!t)
            goto oom;
        t->count++;
        int ok = !strcmp(st, "ok");
        if (ok) {
            /* keep the three best by score, best first */
            size_t pos = n_best < 3 ? n_best : 3;
            while (pos > 0 && entries[best[pos - 1]].score < m->score)
                pos--;
            if (pos < 3) {
                for (size_t j = (n_best < 3 ? n_best : 2); j > pos; j--)
                    best[j] = best[j - 1];
                best[pos] = i;
                if (n_best < 3)
                    n_best++;
            }
            json_t *knobs = m->knobs_json ? json_loads(m->knobs_json, 0, NULL) : NULL;
            const char *name;
            json_t *val;
            json_object_foreach(knobs, name, val)
            {
                char *key = json_is_string(val)
                                ? cuco_sprintf("%s=%s", name, json_string_value(val))
                                : cuco_sprintf("%s=%g", name, json_number_value(val));
                struct tally *kv = key ? tally_get(&knob_values, key) : NULL;
                free(key);
                if (!kv) {
                    json_decref(knobs);
                    goto oom;
                }
                kv->count++;
                kv->sum += m->score;
            }
            json_decref(knobs);
        } else if (m->error && *m->error) {
            char *line = failure_line(m->error);
            if (line && *line) {
                char *key = cuco_sprintf("%s: %s", st, line);
                struct tally *f = key ? tally_get(&failures, key) : NULL;
                free(key);
                if (!f) {
                    free(line);
                    goto oom;
                }
                f->count++;
            }
            free(line);
        }
    }
    if (status.n > 1)
        qsort(status.items, status.n, sizeof *status.items, by_count_desc);
    cuco_buf_printf(out, "%zu programs evaluated:", n);
    for (size_t i = 0; i < status.n; i++)
        cuco_buf_printf(out, "%s %ld %s", i ? "," : "", status.items[i].count, status.items[i].key);
    cuco_buf_puts(out, ".\n");
    for (size_t i = 0; i < n_best; i++) {
        const cuco_meta_entry *m = &entries[best[i]];
        cuco_buf_printf(out, "%s: speedup %.4f", i == 0 ? "Best" : "Next", m->score);
        if (m->mutator)
            cuco_buf_printf(out, " (%s)", m->mutator);
        if (m->knobs_json && strcmp(m->knobs_json, "{}"))
            cuco_buf_printf(out, " with knobs %s", m->knobs_json);
        cuco_buf_puts(out, ".\n");
    }
    /* the knob value with the best mean score, per knob */
    for (size_t i = 0; i < knob_values.n; i++) {
        const struct tally *a = &knob_values.items[i];
        const char *eq = strchr(a->key, '=');
        size_t nlen = (size_t)(eq - a->key);
        int is_best = 1;
        for (size_t j = 0; j < knob_values.n; j++) {
            const struct tally *b = &knob_values.items[j];
            if (j == i || strncmp(b->key, a->key, nlen + 1))
                continue;
            if (b->sum / (double)b->count > a->sum / (double)a->count)
                is_best = 0;
        }
        if (is_best && a->count > 0)
            cuco_buf_printf(out, "Knob %s scored best on average: %.4f over %ld programs.\n",
                            a->key, a->sum / (double)a->count, a->count);
    }
    if (failures.n > 1)
        qsort(failures.items, failures.n, sizeof *failures.items, by_count_desc);
    for (size_t i = 0; i < failures.n && i < 3; i++)
        cuco_buf_printf(out, "Common failure (%ldx): %s\n", failures.items[i].count,
                        failures.items[i].key);
    goto out;
oom:
    rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
out:
    tallies_free(&status);
    tallies_free(&knob_values);
    tallies_free(&failures);
    return rc;
}

int cuco_meta_summary_prompt(const char *workload, const char *previous,
                             const cuco_meta_entry *entries, size_t n, char **user, cuco_err *e)
{
    cuco_buf history = CUCO_BUF_INIT, out = CUCO_BUF_INIT;
    char *tmpl = NULL;
    int rc = cuco_llm_template_load("meta.md", &tmpl, e);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        const cuco_meta_entry *m = &entries[i];
        cuco_buf_printf(&history, "- %s", m->status ? m->status : "unknown");
        if (m->status && !strcmp(m->status, "ok"))
            cuco_buf_printf(&history, ", score %.4f", m->score);
        if (m->mutator)
            cuco_buf_printf(&history, ", by %s", m->mutator);
        if (m->knobs_json && strcmp(m->knobs_json, "{}"))
            cuco_buf_printf(&history, ", knobs %s", m->knobs_json);
        if (m->error && *m->error) {
            char *line = failure_line(m->error);
            if (line && *line)
                cuco_buf_printf(&history, ": %s", line);
            free(line);
        }
        cuco_buf_putc(&history, '\n');
    }
    const cuco_llm_var vars[] = {
        {"workload", workload ? workload : "(unnamed)"},
        {"previous_summary", previous},
        {"history", cuco_buf_str(&history)},
    };
    rc = cuco_llm_template_fill(tmpl, "src/llm/prompts/meta.md", vars, 3, &out, e);
    if (!rc)
        *user = cuco_buf_detach(&out);
    free(tmpl);
    cuco_buf_free(&history);
    cuco_buf_free(&out);
    return rc;
}

int cuco_llm_novelty_prompt(const char *candidate, const char *neighbour, char **user, cuco_err *e)
{
    char *tmpl = NULL;
    int rc = cuco_llm_template_load("novelty.md", &tmpl, e);
    if (rc)
        return rc;
    char *cand = cuco_llm_blocks_text(candidate);
    char *near = cuco_llm_blocks_text(neighbour);
    const cuco_llm_var vars[] = {{"candidate_code", cand}, {"neighbour_code", near}};
    cuco_buf out = CUCO_BUF_INIT;
    rc = cuco_llm_template_fill(tmpl, "src/llm/prompts/novelty.md", vars, 2, &out, e);
    if (!rc)
        *user = cuco_buf_detach(&out);
    cuco_buf_free(&out);
    free(cand);
    free(near);
    free(tmpl);
    return rc;
}

int cuco_llm_novelty_parse(const char *answer, int *novel, cuco_err *e)
{
    const char *p = answer ? answer : "";
    while (*p && !((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
        p++; /* skip markdown such as "**" */
    if (!strncasecmp(p, "NOVEL", 5)) {
        *novel = 1;
        return 0;
    }
    if (!strncasecmp(p, "DUPLICATE", 9)) {
        *novel = 0;
        return 0;
    }
    return cuco_err_set(e, CUCO_EINVAL,
                        "novelty answer starts with neither NOVEL nor DUPLICATE: %.60s", p);
}
