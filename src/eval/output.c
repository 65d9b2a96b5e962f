/* output.c: reading what a candidate printed (the last "Verification:" line
 * and the last "CUCO_RESULT {json}" line), the frozen code's vouch for it
 * (the CUCO_VOUCH line and its nonce), the status names, and the result of
 * an evaluation as one JSON object. */
#include "cuco/buf.h"
#include "cuco/eval.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

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

int cuco_vouch_new_nonce(char nonce[CUCO_NONCE_LEN + 1], cuco_err *e)
{
    unsigned char raw[CUCO_NONCE_LEN / 2];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    if (got < sizeof raw) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        while (fd >= 0 && got < sizeof raw) {
            ssize_t n = read(fd, raw + got, sizeof raw - got);
            if (n <= 0 && !(n < 0 && errno == EINTR))
                break;
            got += n > 0 ? (size_t)n : 0;
        }
        if (fd >= 0)
            close(fd);
        if (got < sizeof raw)
            return cuco_err_errno(e, "cannot read random bytes for the run's nonce");
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof raw; i++) {
        nonce[2 * i] = hex[raw[i] >> 4];
        nonce[2 * i + 1] = hex[raw[i] & 15];
    }
    nonce[CUCO_NONCE_LEN] = '\0';
    return 0;
}

unsigned long long cuco_fnv1a64(const char *s, size_t n)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

/* The kinds of lines the vouch is about. */
enum line_kind { LINE_OTHER, LINE_VERIFICATION, LINE_RESULT, LINE_VOUCH };

static enum line_kind line_kind_of(const char *s, size_t left)
{
    if (left >= 13 && !memcmp(s, "Verification:", 13))
        return LINE_VERIFICATION;
    if (left >= 11 && !memcmp(s, "CUCO_RESULT", 11) &&
        (left == 11 || s[11] == ' ' || s[11] == '\t' || s[11] == '\r'))
        return LINE_RESULT;
    if (left >= 10 && !memcmp(s, "CUCO_VOUCH", 10) &&
        (left == 10 || s[10] == ' ' || s[10] == '\t' || s[10] == '\r'))
        return LINE_VOUCH;
    return LINE_OTHER;
}

/* The lines of one output that cuco reads (the result and the vouch is
 * checked against): views of the text after each line's leading blanks, to
 * the end of the line. */
typedef struct result_lines {
    const char *verdict, *result, *vouch; /* the last of each kind, or NULL */
    size_t verdict_len, result_len, vouch_len;
    int verdict_at, result_at, vouch_at; /* their line numbers */
    int nonce_seen;                      /* some CUCO_VOUCH line carries the nonce */
} result_lines;

/* Whether a CUCO_VOUCH line (from its first field) carries nonce. */
static int carries_nonce(const char *s, size_t n, const char *nonce)
{
    size_t i = 10, k = strlen(nonce);
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    return n - i >= k && !memcmp(s + i, nonce, k) &&
           (n - i == k || s[i + k] == ' ' || s[i + k] == '\t' || s[i + k] == '\r');
}

static void find_result_lines(const char *text, const char *nonce, result_lines *vl)
{
    memset(vl, 0, sizeof *vl);
    int at = 0;
    for (const char *p = text ? text : ""; *p; at++) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *s = p;
        while (s < p + n && (*s == ' ' || *s == '\t'))
            s++;
        size_t left = n - (size_t)(s - p);
        switch (line_kind_of(s, left)) {
        case LINE_VERIFICATION:
            vl->verdict = s + 13, vl->verdict_len = left - 13, vl->verdict_at = at;
            break;
        case LINE_RESULT:
            vl->result = s + 11, vl->result_len = left - 11, vl->result_at = at;
            break;
        case LINE_VOUCH:
            vl->vouch = s, vl->vouch_len = left, vl->vouch_at = at;
            vl->nonce_seen |= carries_nonce(s, left, nonce);
            break;
        default:
            break;
        }
        p = nl ? nl + 1 : p + n;
    }
}

void cuco_run_output_parse(const char *text, cuco_run_output *out)
{
    memset(out, 0, sizeof *out);
    out->time_ms = -1;
    result_lines rl;
    find_result_lines(text, "", &rl);
    const char *verdict = rl.verdict, *result = rl.result;
    size_t verdict_len = rl.verdict_len, result_len = rl.result_len;
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

/* The fields of a CUCO_VOUCH line: nonce, hash, verdict; 0 when there are
 * exactly three after the tag. */
static int vouch_fields(const char *s, size_t n, char *f[3])
{
    char *line = trimmed_copy(s, n);
    int count = 0;
    char *save = NULL;
    strtok_r(line, " \t", &save); /* the tag */
    for (char *w = strtok_r(NULL, " \t", &save); w; w = strtok_r(NULL, " \t", &save))
        if (count++ < 3)
            f[count - 1] = cuco_strdup(w);
    free(line);
    return count == 3 ? 0 : -1;
}

/* The verdict of a Verification: line's text: "PASS" or "FAIL". */
static const char *verdict_word(const char *s, size_t n)
{
    char *v = trimmed_copy(s, n);
    const char *w = !strcmp(v, "PASS") || cuco_str_starts_with(v, "PASS ") ? "PASS" : "FAIL";
    free(v);
    return w;
}

static cuco_vouch vouch_fail(char **why, cuco_vouch v, const char *what)
{
    *why = cuco_sprintf("the frozen code did not vouch for this run: %s", what);
    return v;
}

/* Whether the last CUCO_VOUCH line's hash and verdict match the last
 * CUCO_RESULT and Verification lines. */
static cuco_vouch vouch_matches(const result_lines *vl, char **why)
{
    char *f[3] = {NULL, NULL, NULL};
    cuco_vouch v = CUCO_VOUCH_OK;
    if (vouch_fields(vl->vouch, vl->vouch_len, f) != 0 || strlen(f[1]) != 16 ||
        strspn(f[1], "0123456789abcdef") != 16 || (strcmp(f[2], "PASS") && strcmp(f[2], "FAIL"))) {
        v = vouch_fail(why, CUCO_VOUCH_BROKEN,
                       "its CUCO_VOUCH line is not 'CUCO_VOUCH <nonce> <16 hex digits> PASS|FAIL'");
        goto out;
    }
    char *json = vl->result ? trimmed_copy(vl->result, vl->result_len) : NULL;
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", json ? cuco_fnv1a64(json, strlen(json)) : 0ULL);
    free(json);
    if (!vl->result || strcmp(hash, f[1]))
        v = vouch_fail(why, CUCO_VOUCH_BROKEN,
                       "the result line was not the one the frozen code "
                       "printed");
    else if (!vl->verdict || strcmp(verdict_word(vl->verdict, vl->verdict_len), f[2]))
        v = vouch_fail(why, CUCO_VOUCH_BROKEN,
                       "the verification line was not the one the frozen "
                       "code printed");
out:
    for (int i = 0; i < 3; i++)
        free(f[i]);
    return v;
}

cuco_vouch cuco_run_output_vouch(const char *text, const char *nonce, char **why)
{
    *why = NULL;
    result_lines vl;
    find_result_lines(text, nonce ? nonce : "", &vl);
    if (!nonce || !*nonce || !vl.nonce_seen)
        return vouch_fail(why, CUCO_VOUCH_NONE, "no CUCO_VOUCH line");
    if (!carries_nonce(vl.vouch, vl.vouch_len, nonce) ||
        (vl.verdict && vl.verdict_at > vl.vouch_at) || (vl.result && vl.result_at > vl.vouch_at))
        return vouch_fail(why, CUCO_VOUCH_BROKEN,
                          "the result line was not the one the frozen code printed (a "
                          "Verification, CUCO_RESULT or CUCO_VOUCH line follows its CUCO_VOUCH)");
    return vouch_matches(&vl, why);
}

void cuco_eval_result_free(cuco_eval_result *r)
{
    free(r->times_ms);
    free(r->metrics_json);
    free(r->excerpt);
    free(r->build_dir);
    free(r->warning);
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
    json_object_set_new(o, "warning", r->warning ? json_string(r->warning) : json_null());
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
