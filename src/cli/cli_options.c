/* cli_options.c: the option tables of the commands (cli_options.h) turned
 * into getopt_long's table, the --help text and the messages of bad usage.
 * getopt_long runs in "return in order" mode ('-' first in its option
 * string): positional arguments come back one by one, and "--" ends the
 * options, so what follows it is told apart from the operands before it. */
#include "cli_options.h"

#include "cuco/buf.h"
#include "cuco/log.h"
#include "cuco/num.h"
#include "cuco/workload.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* getopt_long's val of an option without a short name: past any char. */
#define CLI_LONG_ONLY 1000
/* the options of every command, after a command's table */
#define CLI_N_COMMON 3

static const cli_option common_options[CLI_N_COMMON] = {
    CLI_OPT_FLAG("quiet", 'q', NULL, "only errors and the final result"),
    CLI_OPT_FLAG("verbose", 'v', NULL, "the debug log on stderr (as CUCO_LOG=debug)"),
    CLI_OPT_FLAG("help", 'h', NULL, "this text"),
};

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cuco %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'cuco %s --help'.\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_opt_ranks(const char *cmd, void *dst, const char *value)
{
    if (cuco_workload_parse_ranks(value) < 0)
        return cli_usage_error(cmd, "--ranks needs a whole number from 1 to 65536, not '%s'",
                               value);
    *(const char **)dst = value;
    return 0;
}

int cli_opt_slots(const char *cmd, void *dst, const char *value)
{
    long n;
    cuco_err e = CUCO_ERR_INIT;
    int bad = strcmp(value, "auto") && cuco_parse_long("--slots", value, 1, 256, &n, &e) != 0;
    cuco_err_clear(&e);
    if (bad)
        return cli_usage_error(cmd, "--slots needs auto or a whole number from 1 to 256, not '%s'",
                               value);
    *(const char **)dst = value;
    return 0;
}

static size_t table_len(const cli_option *opts)
{
    size_t n = 0;
    while (opts && opts[n].name)
        n++;
    return n;
}

/* The i-th option of the command's table followed by the common ones. */
static const cli_option *option_at(const cli_option *opts, size_t n, size_t i)
{
    return i < n ? &opts[i] : &common_options[i - n];
}

static int option_val(const cli_option *o, size_t i)
{
    return o->short_name ? o->short_name : CLI_LONG_ONLY + (int)i;
}

/* The entry of getopt's val, or NULL. */
static const cli_option *option_of_val(const cli_option *opts, size_t n, int val)
{
    for (size_t i = 0; i < n + CLI_N_COMMON; i++)
        if (val && option_val(option_at(opts, n, i), i) == val)
            return option_at(opts, n, i);
    return NULL;
}

/* getopt_long's table and option string; NULL when out of memory. */
static struct option *getopt_table(const cli_option *opts, size_t n, char **optstring)
{
    struct option *t = calloc(n + CLI_N_COMMON + 1, sizeof *t);
    char *s = malloc(3 + 2 * (n + CLI_N_COMMON) + 1);
    if (!t || !s) {
        free(t);
        free(s);
        return NULL;
    }
    size_t k = 0;
    s[k++] = '-'; /* positional arguments in order, as option 1 */
    s[k++] = ':'; /* a missing value is ':', not '?' */
    for (size_t i = 0; i < n + CLI_N_COMMON; i++) {
        const cli_option *o = option_at(opts, n, i);
        int has_value = o->kind != CLI_FLAG;
        t[i] = (struct option){o->name, has_value ? required_argument : no_argument, NULL,
                               option_val(o, i)};
        if (o->short_name) {
            s[k++] = (char)o->short_name;
            if (has_value)
                s[k++] = ':';
        }
    }
    s[k] = '\0';
    *optstring = s;
    return t;
}

/* The message of an option getopt refused ('?') or found without its value (':'). */
static int option_error(const char *cmd, const cli_option *opts, size_t n, int c, const char *token)
{
    const cli_option *o = option_of_val(opts, n, optopt);
    if (c == ':' && o)
        return cli_usage_error(cmd, "option '--%s' needs a value (%s)", o->name, o->value);
    if (o && !strncmp(token, "--", 2))
        return cli_usage_error(cmd, "option '--%s' takes no value", o->name);
    if (optopt && optopt < CLI_LONG_ONLY && strncmp(token, "--", 2))
        return cli_usage_error(cmd, "unknown option '-%c'", optopt);
    size_t len = strcspn(token, "=");
    int matches = 0;
    for (size_t i = 0; i < n + CLI_N_COMMON && len > 2; i++)
        matches += !strncmp(option_at(opts, n, i)->name, token + 2, len - 2);
    if (matches > 1)
        return cli_usage_error(cmd, "ambiguous option '%.*s'", (int)len, token);
    return cli_usage_error(cmd, "unknown option '%.*s'", (int)len, token);
}

static int range_error(const char *cmd, const cli_option *o, const char *value, int whole)
{
    if (whole)
        return cli_usage_error(cmd, "--%s needs a whole number from %.0f to %.0f, not '%s'",
                               o->name, o->min, o->max, value);
    return cli_usage_error(cmd, "--%s needs a number from %g to %g, not '%s'", o->name, o->min,
                           o->max, value);
}

/* Stores the value of one option of the command's table. */
static int option_store(const char *cmd, const cli_option *o, const char *value)
{
    cuco_err e = CUCO_ERR_INIT;
    long lv = 0;
    double dv = 0;
    int bad = 0;
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->dst = 1;
        break;
    case CLI_STRING:
        *(const char **)o->dst = value;
        break;
    case CLI_INT:
    case CLI_LONG:
    case CLI_LONG_TEXT:
        bad = cuco_parse_long(o->name, value, (long)o->min, (long)o->max, &lv, &e) != 0;
        if (!bad && o->kind == CLI_INT)
            *(int *)o->dst = (int)lv;
        else if (!bad && o->kind == CLI_LONG)
            *(long *)o->dst = lv;
        else if (!bad)
            *(const char **)o->dst = value;
        break;
    case CLI_DOUBLE:
    case CLI_DOUBLE_TEXT:
        bad = cuco_parse_double(o->name, value, o->min, o->max, &dv, &e) != 0;
        if (!bad && o->kind == CLI_DOUBLE)
            *(double *)o->dst = dv;
        else if (!bad)
            *(const char **)o->dst = value;
        break;
    case CLI_LIST:
        if (cuco_strlist_push(o->dst, value) != 0)
            bad = -1;
        break;
    case CLI_CALL:
        return o->call(cmd, o->dst, value) ? CLI_EXIT_USAGE : 0;
    }
    cuco_err_clear(&e);
    if (bad < 0) {
        fprintf(stderr, "cuco %s: out of memory\n", cmd);
        return CLI_EXIT_FAILED;
    }
    return bad ? range_error(cmd, o, value, o->kind != CLI_DOUBLE && o->kind != CLI_DOUBLE_TEXT)
               : 0;
}

/* 1 when -h or --help comes before "--" (a pass of getopt that ignores
 * everything else, so that --help wins over any error). */
static int wants_help(struct option *t, const char *optstring, int argc, char **argv)
{
    int help = 0, c;
    optind = 0; /* glibc: start a new scan */
    opterr = 0;
    while ((c = getopt_long(argc, argv, optstring, t, NULL)) != -1)
        help |= c == 'h';
    optind = 0;
    return help;
}

static void set_log_level(const cli_args *a)
{
    if (a->verbose) {
        cuco_log_set_level(CUCO_LOG_DEBUG);
        setenv("CUCO_LOG", "debug", 1);
    } else if (a->quiet) {
        cuco_log_set_level(CUCO_LOG_ERROR);
        setenv("CUCO_LOG", "error", 1);
    }
}

/* One step of the scan: an option, or a positional argument (c == 1);
 * what it took is noted in seen for the debug log. */
static int scan_one(const cli_command *cmd, const cli_option *opts, size_t n, int c,
                    const char *token, cli_args *out, cuco_buf *seen)
{
    const cli_option *known = c == 1 || c == '?' || c == ':' ? NULL : option_of_val(opts, n, c);
    if (known)
        cuco_buf_printf(seen, " --%s%s%s", known->name, optarg ? "=" : "", optarg ? optarg : "");
    else if (c == 1)
        cuco_buf_printf(seen, " %s", optarg);
    if (c == 1) {
        out->pos[out->n_pos++] = optarg;
        return 0;
    }
    if (c == '?' || c == ':')
        return option_error(cmd->name, opts, n, c, token);
    if (c == 'q' || c == 'v') {
        *(c == 'q' ? &out->quiet : &out->verbose) = 1;
        return 0;
    }
    const cli_option *o = option_of_val(opts, n, c);
    return o && o->dst ? option_store(cmd->name, o, optarg) : 0;
}

static int check_operands(const cli_command *cmd, cli_args *out)
{
    if (out->n_pos < cmd->min_args)
        return cli_usage_error(cmd->name, "no %s given", cmd->operand ? cmd->operand : "argument");
    if (cmd->max_args >= 0 && out->n_pos > cmd->max_args)
        return cli_usage_error(cmd->name, "unexpected argument '%s'", out->pos[cmd->max_args]);
    return CLI_CONTINUE;
}

int cli_parse(const cli_command *cmd, const cli_option *opts, int argc, char **argv, cli_args *out)
{
    memset(out, 0, sizeof *out);
    size_t n = table_len(opts);
    char *optstring = NULL;
    struct option *t = getopt_table(opts, n, &optstring);
    out->pos = calloc((size_t)argc + 1, sizeof *out->pos);
    if (!t || !out->pos) {
        free(t);
        free(optstring);
        fprintf(stderr, "cuco %s: out of memory\n", cmd->name);
        return CLI_EXIT_FAILED;
    }
    int rc = CLI_CONTINUE;
    cuco_buf seen = CUCO_BUF_INIT;
    if (wants_help(t, optstring, argc, argv)) {
        cli_help(cmd, opts, stdout);
        rc = CLI_EXIT_OK;
    }
    while (rc == CLI_CONTINUE) {
        int at = optind ? optind : 1;
        int c = getopt_long(argc, argv, optstring, t, NULL);
        if (c == -1)
            break;
        /* the token getopt refused: the one it stepped past, or the one it stays on */
        const char *token = argv[optind > at ? optind - 1 : at];
        int src = scan_one(cmd, opts, n, c, token, out, &seen);
        if (src)
            rc = src;
    }
    if (rc == CLI_CONTINUE) {
        for (int i = optind; i < argc; i++) {
            if (cmd->rest)
                out->rest = out->rest ? out->rest : argv + i;
            else
                out->pos[out->n_pos++] = argv[i];
        }
        out->n_rest = out->rest ? (int)(argv + argc - out->rest) : 0;
        rc = check_operands(cmd, out);
    }
    if (rc == CLI_CONTINUE) {
        set_log_level(out);
        cuco_debug("cuco %s:%s%s", cmd->name, cuco_buf_str(&seen), out->n_rest ? " -- ..." : "");
    } else {
        cli_args_free(out);
    }
    cuco_buf_free(&seen);
    free(t);
    free(optstring);
    return rc;
}

void cli_args_free(cli_args *a)
{
    free(a->pos);
    memset(a, 0, sizeof *a);
}

/* "  -o, --out FILE" */
static int option_left(const cli_option *o, char *buf, size_t size)
{
    char shortname[8] = "    ";
    if (o->short_name)
        snprintf(shortname, sizeof shortname, "-%c, ", o->short_name);
    return snprintf(buf, size, "  %s--%s%s%s", shortname, o->name, o->value ? " " : "",
                    o->value ? o->value : "");
}

static void option_help(const cli_option *o, int width, FILE *out)
{
    char left[128];
    int len = option_left(o, left, sizeof left);
    fputs(left, out);
    const char *h = o->help ? o->help : "";
    if (len + 2 > width) {
        fputc('\n', out);
        len = 0;
    }
    fprintf(out, "%*s", width - len, "");
    for (; *h; h++) {
        fputc(*h, out);
        if (*h == '\n' && h[1])
            fprintf(out, "%*s", width, "");
    }
    fputc('\n', out);
}

void cli_help(const cli_command *cmd, const cli_option *opts, FILE *out)
{
    size_t n = table_len(opts);
    int width = 0;
    char left[128];
    for (size_t i = 0; i < n + CLI_N_COMMON; i++) {
        int len = option_left(option_at(opts, n, i), left, sizeof left) + 2;
        if (len > width && len <= 26)
            width = len;
    }
    fprintf(out, "usage: cuco %s %s\n\n%s\nOptions:\n", cmd->name, cmd->synopsis,
            cmd->about ? cmd->about : "");
    for (size_t i = 0; i < n + CLI_N_COMMON; i++)
        option_help(option_at(opts, n, i), width, out);
    fprintf(out, "Every option's value may follow it (--opt value) or be joined to it\n"
                 "(--opt=value); a long option may be shortened to a prefix that is unique.\n");
    if (cmd->after)
        fprintf(out, "\n%s", cmd->after);
}
