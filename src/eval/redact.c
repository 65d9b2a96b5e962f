/* redact.c: takes out of excerpts, error texts and prompts what must not
 * leave the machine through them (see cuco/redact.h): text shaped like a
 * secret, and what a compiler quotes from files outside a candidate's own
 * sources. The cascade applies both to every excerpt it makes; the engine
 * and the LLM mutators apply the secret part to whatever else they store or
 * send. Patterns err on the side of redacting: an excerpt that loses a long
 * token after "key =" costs less than a key in a prompt. */
#define _GNU_SOURCE
#include "cuco/redact.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cuco/buf.h"

/* ---- secrets ----------------------------------------------------------- */

static int is_token_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '-' || ch == '.' || ch == '+' || ch == '/' ||
           ch == '=' || ch == '~';
}

/* Length of the run of chars at s for which ok() holds. */
static size_t run_of(const char *s, int (*ok)(int))
{
    size_t n = 0;
    while (s[n] && ok((unsigned char)s[n]))
        n++;
    return n;
}

static int is_key_char(int ch)
{
    return isalnum(ch) || ch == '_' || ch == '-';
}

static int is_upper_digit(int ch)
{
    return isupper(ch) || isdigit(ch);
}

static int is_word_char(int ch)
{
    return isalnum(ch) || ch == '_';
}

/* A key with a known prefix at s ("sk-...", "AKIA...", "ghp_..."): its
 * length, 0 when there is none. */
static size_t prefixed_key(const char *s)
{
    static const struct {
        const char *prefix;
        size_t min_rest;
        int (*ok)(int);
    } kinds[] = {
        {"sk-", 16, is_key_char},   {"AKIA", 16, is_upper_digit},      {"ASIA", 16, is_upper_digit},
        {"ghp_", 20, is_word_char}, {"gho_", 20, is_word_char},        {"ghs_", 20, is_word_char},
        {"ghu_", 20, is_word_char}, {"github_pat_", 20, is_word_char}, {"xoxb-", 10, is_key_char},
        {"xoxp-", 10, is_key_char}, {"hf_", 30, is_word_char},         {"glpat-", 20, is_key_char},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t p = strlen(kinds[k].prefix);
        if (strncmp(s, kinds[k].prefix, p))
            continue;
        size_t rest = run_of(s + p, kinds[k].ok);
        if (rest >= kinds[k].min_rest)
            return p + rest;
    }
    return 0;
}

/* "Bearer TOKEN" at s: *skip is the length of "Bearer " (kept), the return
 * the token's length (0: none). */
static size_t bearer_token(const char *s, size_t *skip)
{
    if (strncasecmp(s, "bearer", 6) || (s[6] != ' ' && s[6] != '\t'))
        return 0;
    size_t k = 6;
    while (s[k] == ' ' || s[k] == '\t')
        k++;
    size_t n = run_of(s + k, is_token_char);
    if (n < 8)
        return 0;
    *skip = k;
    return n;
}

static int has_digit_and_letter(const char *s, size_t n)
{
    int digit = 0, letter = 0;
    for (size_t i = 0; i < n; i++) {
        digit |= isdigit((unsigned char)s[i]) != 0;
        letter |= isalpha((unsigned char)s[i]) != 0;
    }
    return digit && letter;
}

/* A keyword that names a secret ends at s + len (key, token, secret,
 * password, passwd; any case; the end of an identifier such as api_key or
 * OPENAI_API_KEY). */
static size_t secret_keyword(const char *s)
{
    static const char *const words[] = {"password", "passwd", "secret", "token", "key"};
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++) {
        size_t n = strlen(words[k]);
        if (!strncasecmp(s, words[k], n) && !isalnum((unsigned char)s[n]) && s[n] != '_')
            return n;
    }
    return 0;
}

/* After a secret keyword ending at s: "= VALUE", ": VALUE", "\"key\": \"VALUE\""
 * or NAME=VALUE (env). *skip is where the value starts, the return its
 * length when it is to be redacted (0: not). */
static size_t keyword_value(const char *s, size_t *skip)
{
    size_t k = 0;
    int env = s[0] == '=';
    while (s[k] == '"' || s[k] == '\'')
        k++;
    while (s[k] == ' ' || s[k] == '\t')
        k++;
    if (s[k] != '=' && s[k] != ':')
        return 0;
    k++;
    while (s[k] == ' ' || s[k] == '\t' || s[k] == '"' || s[k] == '\'')
        k++;
    size_t n = run_of(s + k, is_token_char);
    *skip = k;
    /* NAME_KEY=VALUE as an environment dump prints it: any value of some
     * length; otherwise a long token that is not a word */
    if (env && n >= 8)
        return n;
    return n >= 16 && has_digit_and_letter(s + k, n) ? n : 0;
}

/* A private key block at s: its length, 0 when there is none. */
static size_t private_key_block(const char *s)
{
    if (strncmp(s, "-----BEGIN ", 11))
        return 0;
    const char *eol = strchr(s, '\n');
    size_t line = eol ? (size_t)(eol - s) : strlen(s);
    const char *pk = strstr(s, "PRIVATE KEY-----");
    if (!pk || (size_t)(pk - s) > line)
        return 0;
    const char *end = strstr(s + line, "-----END ");
    if (!end)
        return strlen(s);
    const char *close = strstr(end + 9, "-----");
    return close ? (size_t)(close + 5 - s) : strlen(s);
}

/* The secret that starts at text[i], if any: *from (>= i) and the return
 * its end (0: none). */
static size_t secret_at(const char *text, size_t i, size_t *from)
{
    const char *s = text + i;
    int boundary = i == 0 || !isalnum((unsigned char)text[i - 1]);
    size_t n, skip = 0;
    if ((n = private_key_block(s)) > 0 || (boundary && (n = prefixed_key(s)) > 0)) {
        *from = i;
        return i + n;
    }
    if (boundary && (n = bearer_token(s, &skip)) > 0) {
        *from = i + skip;
        return i + skip + n;
    }
    size_t kw = secret_keyword(s);
    if (kw && (n = keyword_value(s + kw, &skip)) > 0) {
        *from = i + kw + skip;
        return i + kw + skip + n;
    }
    return 0;
}

char *cuco_redact_secrets(const char *text)
{
    cuco_buf b = CUCO_BUF_INIT;
    size_t copied = 0;
    if (!text)
        text = "";
    for (size_t i = 0; text[i];) {
        size_t from = 0, end = secret_at(text, i, &from);
        if (!end) {
            i++;
            continue;
        }
        cuco_buf_append(&b, text + copied, from - copied);
        cuco_buf_puts(&b, CUCO_REDACTED);
        copied = i = end;
    }
    cuco_buf_puts(&b, text + copied);
    return cuco_buf_detach(&b);
}

/* ---- compiler output ----------------------------------------------------- */

enum line_kind {
    LINE_OTHER,      /* quoted source, carets, anything else */
    LINE_CONTEXT,    /* "In file included from P:N," / "from P:N:" */
    LINE_DIAGNOSTIC, /* "P:N:C: error: ...", "P(N): error: ...", "P: In function" */
};

/* Where a line names a file: the path [path, path + path_len) and the end of
 * the location, after which the message starts. */
typedef struct location {
    const char *path;
    size_t path_len;
    size_t end;
} location;

static size_t digits(const char *s)
{
    size_t n = 0;
    while (isdigit((unsigned char)s[n]))
        n++;
    return n;
}

/* "P:N[:C]" then ':' or ',' (gcc, clang) or "P(N)" then ':' (nvcc, EDG)
 * from the start of s: the location, 0 when s does not start with one. */
static int path_line(const char *s, size_t len, location *loc)
{
    for (size_t k = 1; k < len; k++) {
        if (s[k] == ':' && isdigit((unsigned char)s[k + 1])) {
            size_t e = k + 1 + digits(s + k + 1);
            if (s[e] == ':' && isdigit((unsigned char)s[e + 1]))
                e += 1 + digits(s + e + 1);
            if (s[e] != ':' && s[e] != ',')
                continue;
            *loc = (location){s, k, e};
            return 1;
        }
        if (s[k] == '(' && isdigit((unsigned char)s[k + 1])) {
            size_t e = k + 1 + digits(s + k + 1);
            if (s[e] != ')' || s[e + 1] != ':')
                continue;
            *loc = (location){s, k, e + 1};
            return 1;
        }
    }
    return 0;
}

/* "P: In function 'f':", "P: At top level:" and the like (gcc). */
static int path_scope(const char *s, size_t len, location *loc)
{
    static const char *const marks[] = {": In ", ": At "};
    for (size_t m = 0; m < 2; m++) {
        const char *hit = memmem(s, len, marks[m], strlen(marks[m]));
        if (hit && (size_t)(hit - s) < len && !memchr(s, ' ', (size_t)(hit - s))) {
            *loc = (location){s, (size_t)(hit - s), (size_t)(hit - s) + 1};
            return 1;
        }
    }
    return 0;
}

static enum line_kind classify(const char *line, size_t len, location *loc)
{
    size_t ws = 0;
    while (ws < len && (line[ws] == ' ' || line[ws] == '\t'))
        ws++;
    static const char *const context[] = {"In file included from ", "from "};
    for (size_t c = 0; c < 2; c++) {
        size_t p = strlen(context[c]);
        if (len - ws > p && !strncmp(line + ws, context[c], p) &&
            path_line(line + ws + p, len - ws - p, loc))
            return LINE_CONTEXT;
    }
    if (line[ws] == '"') {
        /* "P", line N: (older EDG front ends) */
        const char *q = memchr(line + ws + 1, '"', len - ws - 1);
        if (q && !strncmp(q, "\", line ", 8) && isdigit((unsigned char)q[8])) {
            size_t end = (size_t)(q + 8 - line) + digits(q + 8);
            *loc = (location){line + ws + 1, (size_t)(q - line - ws - 1), end};
            return LINE_DIAGNOSTIC;
        }
    }
    if (ws == 0 && (path_line(line, len, loc) || path_scope(line, len, loc)))
        return LINE_DIAGNOSTIC;
    return LINE_OTHER;
}

/* The real paths of the roots, each ending in '/'. */
static char **real_roots(const char *const *roots, size_t n)
{
    char **real = calloc(n + 1, sizeof *real);
    for (size_t i = 0; real && i < n; i++) {
        char *r = roots[i] ? realpath(roots[i], NULL) : NULL;
        real[i] = r ? cuco_sprintf("%s%s", r, cuco_str_ends_with(r, "/") ? "" : "/") : NULL;
        free(r);
    }
    return real;
}

static void free_roots(char **real, size_t n)
{
    for (size_t i = 0; real && i < n; i++)
        free(real[i]);
    free(real);
}

/* 1 when path lies under one of the roots, 0 when it does not, -1 when it
 * names no file at all. */
static int path_inside(const char *path, size_t len, const char *cwd, char *const *roots, size_t n)
{
    char *name = len && path[0] != '/' && cwd ? cuco_sprintf("%s/%.*s", cwd, (int)len, path)
                                              : cuco_strndup(path, len);
    char *real = name ? realpath(name, NULL) : NULL;
    int inside = real ? 0 : -1;
    for (size_t i = 0; real && i < n && !inside; i++)
        inside = roots[i] && !strncmp(real, roots[i], strlen(roots[i]));
    free(real);
    free(name);
    return inside;
}

/* The severity word a withheld diagnostic keeps ("error", "warning"...). */
static const char *severity_of(const char *msg, size_t len)
{
    static const char *const words[] = {"fatal error", "error", "warning", "note", "remark"};
    while (len && (*msg == ':' || *msg == ' ')) {
        msg++;
        len--;
    }
    for (size_t k = 0; k < sizeof words / sizeof words[0]; k++)
        if (len >= strlen(words[k]) && !strncmp(msg, words[k], strlen(words[k])))
            return words[k];
    return NULL;
}

/* Lines a compiler prints after its diagnostics, never quoted source. */
static int is_trailer(const char *line, size_t len)
{
    if (len >= 23 && !strncmp(line, "compilation terminated.", 23))
        return 1;
    size_t d = digits(line);
    return d > 0 && d < len && line[d] == ' ' &&
           (!strncmp(line + d + 1, "error", 5) || !strncmp(line + d + 1, "warning", 7));
}

char *cuco_redact_compiler_output(const char *log, const char *cwd, const char *const *roots,
                                  size_t n)
{
    char **real = real_roots(roots, n);
    if (!real)
        return NULL;
    cuco_buf b = CUCO_BUF_INIT;
    int withholding = 0;
    for (const char *line = log ? log : ""; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        size_t next = nl ? len + 1 : len;
        location loc;
        enum line_kind kind = classify(line, len, &loc);
        const char *sev = kind == LINE_OTHER ? NULL : severity_of(line + loc.end, len - loc.end);
        int inside = kind == LINE_OTHER ? 0 : path_inside(loc.path, loc.path_len, cwd, real, n);
        /* a quoted line can look like "x:1:2: ..." too: a location names a
         * file that exists or is followed by a severity */
        if (kind == LINE_DIAGNOSTIC && inside < 0 && !sev)
            kind = LINE_OTHER;
        if (kind == LINE_DIAGNOSTIC && inside != 1) {
            cuco_buf_append(&b, line, loc.end);
            cuco_buf_printf(&b, ": %s%s[withheld: a file outside the program's sources]\n",
                            sev ? sev : "", sev ? ": " : "");
            withholding = 1;
        } else if (kind != LINE_OTHER || !withholding || is_trailer(line, len)) {
            cuco_buf_append(&b, line, next);
            if (kind != LINE_OTHER)
                withholding = 0;
        }
        line += next;
    }
    free_roots(real, n);
    char *out = cuco_buf_detach(&b);
    return out ? out : cuco_strdup("");
}
