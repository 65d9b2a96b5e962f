/* output.c: reading what a candidate printed (the last "Verification:" line
 * and the last "CUCO_RESULT {json}" line), the status names, and the result
 * of an evaluation as one JSON object. */
#include "cuco/buf.h"
#include "cuco/eval.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const status_names[] = {
    "ok",           "compile_error",    "run_error",  "timeout",
    "wrong_answer", "frozen_violation", "bad_output", "infra_error",
};

const char *cuco_eval_status_name(cuco_eval_status s)
{
    if ((int)s < 0 || (size_t)s >= sizeof status_names / sizeof status_names[0])
        return "unknown";
    return status_names[s];
}

int cuco_eval_status_parse(const char *name)
{
    for (size_t i = 0; name && i < sizeof status_names / sizeof status_names[0]; i++)
        if (!strcmp(name, status_names[i]))
            return (int)i;
    return -1;
}

void cuco_run_output_free(cuco_run_output *out)
{
    free(out->fail_reason);
    free(out->result_json);
    free(out->parse_error);
    memset(out, 0, sizeof *out);
    out->time_ms = -1;
}

/* Copies [s, s+n) with trailing whitespace (and a '\r') removed. */
static char *trimmed_copy(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        n--;
    while (n > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    return cuco_strndup(s, n);
}

static void parse_result(const char *json_text, cuco_run_output *out)
{
    json_error_t jerr;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        out->parse_error =
            cuco_sprintf("malformed CUCO_RESULT JSON (column %d: %s)", jerr.column, jerr.text);
        return;
    }
    if (!json_is_object(root)) {
        out->parse_error = cuco_strdup("CUCO_RESULT must be a JSON object");
        json_decref(root);
        return;
    }
    out->result_json = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_t *t = json_object_get(root, "time_ms");
    if (!t) {
        out->parse_error = cuco_strdup("CUCO_RESULT has no time_ms");
    } else if (!json_is_number(t)) {
        out->parse_error = cuco_strdup("CUCO_RESULT time_ms is not a number");
    } else {
        double v = json_number_value(t);
        if (!isfinite(v) || v <= 0)
            out->parse_error =
                cuco_sprintf("CUCO_RESULT time_ms must be a finite number > 0, not %g", v);
        else
            out->time_ms = v;
    }
    json_decref(root);
}

void cuco_run_output_parse(const char *text, cuco_run_output *out)
{
    memset(out, 0, sizeof *out);
    out->time_ms = -1;
    const char *verdict = NULL, *result = NULL;
    size_t verdict_len = 0, result_len = 0;
    for (const char *p = text ? text : ""; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *s = p;
        while (s < p + n && (*s == ' ' || *s == '\t'))
            s++;
        size_t left = n - (size_t)(s - p);
        if (left >= 13 && !memcmp(s, "Verification:", 13)) {
            verdict = s + 13;
            verdict_len = left - 13;
        } else if (left >= 11 && !memcmp(s, "CUCO_RESULT", 11) &&
                   (left == 11 || s[11] == ' ' || s[11] == '\t' || s[11] == '\r')) {
            result = s + 11;
            result_len = left - 11;
        }
        p = nl ? nl + 1 : p + n;
    }
    if (verdict) {
        char *v = trimmed_copy(verdict, verdict_len);
        out->has_verification = 1;
        if (!strcmp(v, "PASS") || cuco_str_starts_with(v, "PASS ")) {
            out->verified = 1;
        } else if (!strcmp(v, "FAIL") || cuco_str_starts_with(v, "FAIL")) {
            char *reason = cuco_strdup(v + 4);
            cuco_str_trim(reason);
            out->fail_reason = *reason ? reason : (free(reason), cuco_strdup("(no reason given)"));
        } else {
            out->fail_reason = cuco_sprintf("unrecognized verdict '%s' (expected PASS or FAIL)", v);
        }
        free(v);
    }
    if (!result) {
        out->parse_error = cuco_strdup("no CUCO_RESULT line in the output");
        return;
    }
    char *json_text = trimmed_copy(result, result_len);
    parse_result(json_text, out);
    free(json_text);
}

void cuco_eval_result_free(cuco_eval_result *r)
{
    free(r->times_ms);
    free(r->metrics_json);
    free(r->excerpt);
    free(r->build_dir);
    memset(r, 0, sizeof *r);
}

static json_t *number_or_null(double v, int have)
{
    return have && isfinite(v) ? json_real(v) : json_null();
}

char *cuco_eval_result_json(const cuco_eval_result *r)
{
    json_t *o = json_object();
    int timed = r->n_times > 0;
    json_object_set_new(o, "status", json_string(cuco_eval_status_name(r->status)));
    json_object_set_new(o, "level", json_integer(r->level));
    json_object_set_new(o, "time_ms", number_or_null(r->time_ms, timed));
    json_object_set_new(o, "time_ms_min", number_or_null(r->time_ms_min, timed));
    json_object_set_new(o, "time_ms_max", number_or_null(r->time_ms_max, timed));
    json_object_set_new(o, "spread", number_or_null(r->spread, timed));
    json_t *times = json_array();
    for (int i = 0; i < r->n_times; i++)
        json_array_append_new(times, json_real(r->times_ms[i]));
    json_object_set_new(o, "times_ms", times);
    json_t *metrics = r->metrics_json ? json_loads(r->metrics_json, 0, NULL) : NULL;
    json_object_set_new(o, "metrics", metrics ? metrics : json_null());
    json_object_set_new(o, "excerpt", r->excerpt ? json_string(r->excerpt) : json_null());
    if (r->excerpt && !json_is_string(json_object_get(o, "excerpt")))
        json_object_set_new(o, "excerpt", json_string("(excerpt is not valid UTF-8)"));
    json_object_set_new(o, "program_hash", json_string(r->program_hash));
    json_object_set_new(o, "compile_s", json_real(r->compile_s));
    json_object_set_new(o, "verify_s", json_real(r->verify_s));
    json_object_set_new(o, "bench_s", json_real(r->bench_s));
    json_object_set_new(o, "build_dir", r->build_dir ? json_string(r->build_dir) : json_null());
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
