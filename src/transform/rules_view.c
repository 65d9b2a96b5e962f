/* rules_view.c: the questions of syntax the rules ask of a program's code
 * tokens (sview.h, with their brace depth): a call's arguments, a
 * function's body, a declaration, a loop; and the NCCL names they know. */
#include "rules_int.h"

void rl_call_args(const sview *v, size_t open, args *a)
{
    a->n = 0;
    a->close = close_of(v, open);
    if (a->close >= v->n || a->close == open + 1)
        return;
    size_t start = open + 1;
    int d = 0;
    for (size_t j = open + 1; j <= a->close; j++) {
        int at_end = j == a->close;
        if (!at_end && (is(v, j, "(") || is(v, j, "[") || is(v, j, "{")))
            d++;
        else if (!at_end && (is(v, j, ")") || is(v, j, "]") || is(v, j, "}")))
            d--;
        if ((at_end || (d == 0 && is(v, j, ",")))) {
            if (a->n >= 16 || j == start) {
                a->n = -1;
                return;
            }
            a->first[a->n] = start;
            a->last[a->n] = j - 1;
            a->n++;
            start = j + 1;
        }
    }
}

char *rl_arg_text(const sview *v, const args *a, int k)
{
    size_t s = tk(v, a->first[k])->off;
    return cuco_strndup(v->src + s, rl_tok_end(v, a->last[k]) - s);
}

size_t rl_chain_last(const sview *v, size_t first, size_t last)
{
    size_t j = first;
    while (j <= last) {
        if (is(v, j, "&") || is(v, j, "*")) {
            j++;
        } else if (is(v, j, "(")) {
            size_t c = close_of(v, j);
            if (c >= last)
                j++; /* a parenthesized expression: look inside */
            else if (c + 1 <= last && (ident(v, c + 1) || is(v, c + 1, "&") || is(v, c + 1, "(")))
                j = c + 1; /* a C cast */
            else
                j++;
        } else if (is(v, j, "static_cast") || is(v, j, "reinterpret_cast") ||
                   is(v, j, "const_cast")) {
            while (j <= last && !is(v, j, "("))
                j++;
            j++;
        } else {
            break;
        }
    }
    if (j > last || !ident(v, j))
        return v->n;
    /* a member of an array element is that member: "layers[i].out" -> out */
    size_t end = j;
    for (;;) {
        size_t k = end + 1;
        while (k <= last && is(v, k, "[")) {
            size_t c = close_of(v, k);
            if (c > last)
                break;
            k = c + 1;
        }
        if (k + 1 <= last &&
            (is(v, k, ".") || is(v, k, "->") || (k == end + 1 && is(v, k, "::"))) &&
            ident(v, k + 1)) {
            end = k + 1;
            continue;
        }
        break;
    }
    return end;
}

int rl_has_group_calls(const sview *v)
{
    for (size_t i = 0; i < v->n; i++)
        if (is(v, i, "ncclGroupStart"))
            return 1;
    return 0;
}

int rl_qualified(const sview *v, size_t i)
{
    return i > 0 && (is(v, i - 1, ".") || is(v, i - 1, "->") || is(v, i - 1, "::"));
}

int rl_is_p2p_name(const char *name)
{
    return !strcmp(name, "ncclSend") || !strcmp(name, "ncclRecv");
}

int rl_is_keyword(const sview *v, size_t i)
{
    static const char *const kw[] = {"return",
                                     "else",
                                     "do",
                                     "case",
                                     "throw",
                                     "co_return",
                                     "co_await",
                                     "if",
                                     "for",
                                     "while",
                                     "switch",
                                     "catch",
                                     "sizeof",
                                     "decltype",
                                     "alignof",
                                     "static_assert",
                                     "__launch_bounds__",
                                     NULL};
    for (const char *const *k = kw; *k; k++)
        if (is(v, i, *k))
            return 1;
    return 0;
}

size_t rl_function_body(const sview *v, size_t open)
{
    size_t j = close_of(v, open);
    if (j >= v->n)
        return 0;
    j++;
    while (j < v->n && (is(v, j, "const") || is(v, j, "noexcept") || is(v, j, "override") ||
                        is(v, j, "final") || is(v, j, "mutable")))
        j++;
    if (is(v, j, ":")) { /* constructor initializers: "a_(a), b_{b} {" */
        for (j++; j < v->n && ident(v, j) && (is(v, j + 1, "(") || is(v, j + 1, "{"));) {
            j = close_of(v, j + 1) + 1;
            if (is(v, j, ","))
                j++;
            else
                break;
        }
    }
    return j < v->n && is(v, j, "{") ? j : 0;
}

size_t rl_call_open(const sview *v, size_t i)
{
    if (is(v, i + 1, "("))
        return i + 1;
    if (!is(v, i + 1, "<"))
        return v->n;
    int d = 0;
    for (size_t j = i + 1; j < v->n && j < i + 64; j++) {
        if (is(v, j, "<"))
            d++;
        else if (is(v, j, ">"))
            d--;
        else if (is(v, j, ">>"))
            d -= 2;
        else if (is(v, j, ";") || is(v, j, "{") || is(v, j, "}") || is(v, j, "<<<") ||
                 is(v, j, "&&") || is(v, j, "||"))
            return v->n;
        if (d <= 0)
            return d == 0 && is(v, j + 1, "(") ? j + 1 : v->n;
    }
    return v->n;
}

size_t rl_def_params(const sview *v, size_t name_tok)
{
    if (is(v, name_tok + 1, "("))
        return name_tok + 1;
    if (is(v, name_tok + 1, "=") && is(v, name_tok + 2, "[")) {
        size_t c = close_of(v, name_tok + 2);
        if (c + 1 < v->n && is(v, c + 1, "("))
            return c + 1;
    }
    return v->n;
}

size_t rl_after_brackets(const sview *v, size_t i)
{
    while (i < v->n && is(v, i, "["))
        i = close_of(v, i) + 1;
    return i < v->n ? i : v->n;
}

int rl_declares_variable(const sview *v, size_t i)
{
    if (!rl_declares(v, i))
        return 0;
    size_t p = i - 1;
    while (p > 0 && (is(v, p, "*") || is(v, p, "&")))
        p--;
    if (!is(v, p, ","))
        return 1;
    size_t k = i;
    while (k > 0) {
        size_t q = k - 1;
        if (is(v, q, ")") || is(v, q, "]") || is(v, q, "}")) {
            int d = 0; /* skip the group back to its opener */
            for (; q > 0; q--) {
                if (is(v, q, ")") || is(v, q, "]") || is(v, q, "}"))
                    d++;
                else if ((is(v, q, "(") || is(v, q, "[") || is(v, q, "{")) && --d == 0)
                    break;
            }
            k = q;
            continue;
        }
        if (is(v, q, "(") || is(v, q, "[") || is(v, q, "{") || is(v, q, ";") || is(v, q, ":"))
            break;
        k = q;
    }
    return ident(v, k) && !rl_is_keyword(v, k) &&
           (ident(v, k + 1) || is(v, k + 1, "*") || is(v, k + 1, "&") || is(v, k + 1, "<") ||
            is(v, k + 1, "::"));
}

int rl_stores_through(const sview *v, size_t i)
{
    size_t s = i;
    while (s >= 2 && (is(v, s - 1, "->") || is(v, s - 1, ".")) && ident(v, s - 2))
        s -= 2;
    if (s > 0 && is(v, s - 1, "(") && is(v, i + 1, ")"))
        s--;
    if (s == 0 || !is(v, s - 1, "*"))
        return 0;
    /* after ';', '{', '}', ')' or '(' the '*' dereferences; after a type
     * ("float *p = v") or a ',' of a declaration list it declares */
    return s < 2 || is(v, s - 2, ";") || is(v, s - 2, "{") || is(v, s - 2, "}") ||
           is(v, s - 2, ")") || is(v, s - 2, "(");
}

size_t rl_enclosing_function(const sview *v, size_t i)
{
    size_t best = v->n;
    for (size_t f = 0; f + 1 < i; f++) {
        size_t open = ident(v, f) && !rl_is_keyword(v, f) ? rl_def_params(v, f) : v->n;
        if (open >= v->n)
            continue;
        size_t body = rl_function_body(v, open);
        if (body && body < i && close_of(v, body) > i)
            best = f;
    }
    return best;
}

int rl_declares(const sview *v, size_t i)
{
    if (i == 0 || !(is(v, i + 1, ";") || is(v, i + 1, ",") || is(v, i + 1, "=") ||
                    is(v, i + 1, "(") || is(v, i + 1, "{") || is(v, i + 1, "[")))
        return 0;
    size_t p = i - 1;
    while (p > 0 && (is(v, p, "*") || is(v, p, "&")))
        p--;
    return (ident(v, p) && !rl_is_keyword(v, p) && !is(v, p, "new") && !is(v, p, "delete") &&
            !is(v, p, "goto")) ||
           is(v, p, ">") || is(v, p, ">>") ||
           (is(v, p, ",") && p > 0 && v->depth[p] == v->depth[i]);
}

size_t rl_declaration_of(const sview *v, const char *s, size_t len)
{
    for (size_t i = 0; i < v->n; i++)
        if (tk(v, i)->len == len && !memcmp(v->src + tk(v, i)->off, s, len) && rl_declares(v, i))
            return i;
    return v->n;
}

int rl_str_in(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

size_t rl_top_start(const sview *v, size_t i)
{
    while (i > 0 && v->scope[i] > 0)
        i--;
    return i;
}

int rl_in_loop(const sview *v, size_t i)
{
    for (size_t f = 0; f < i; f++) {
        size_t body;
        if ((is(v, f, "for") || is(v, f, "while")) && is(v, f + 1, "("))
            body = close_of(v, f + 1) + 1;
        else if (is(v, f, "do"))
            body = f + 1;
        else
            continue;
        if (body >= v->n || body > i)
            continue;
        size_t end = body;
        if (is(v, body, "{")) {
            end = close_of(v, body);
        } else {
            int d = 0;
            for (; end < v->n; end++) {
                if (is(v, end, "(") || is(v, end, "[") || is(v, end, "{"))
                    d++;
                else if (is(v, end, ")") || is(v, end, "]") || is(v, end, "}"))
                    d--;
                else if (d == 0 && is(v, end, ";"))
                    break;
            }
        }
        if (i < end)
            return 1;
    }
    return 0;
}

int rl_in_control_header(const sview *v, size_t i)
{
    for (size_t p = sview_paren_around(v, i); p < v->n && p > 0; p = sview_paren_around(v, p))
        if (is(v, p - 1, "if") || is(v, p - 1, "while") || is(v, p - 1, "for") ||
            is(v, p - 1, "switch"))
            return 1;
    return 0;
}

int rl_control_body(const sview *v, size_t i, size_t *lo)
{
    size_t s = i;
    while (s > 0) {
        size_t p = s - 1;
        if (is(v, p, ";") || is(v, p, "{") || is(v, p, "}"))
            break;
        if (is(v, p, "else") || is(v, p, "do")) {
            *lo = tk(v, s)->off;
            return 1;
        }
        if (is(v, p, ")")) {
            int d = 0;
            size_t q = p;
            for (;; q--) {
                if (is(v, q, ")"))
                    d++;
                else if (is(v, q, "(") && --d == 0)
                    break;
                if (q == 0)
                    return 0;
            }
            if (q > 0 && (is(v, q - 1, "for") || is(v, q - 1, "while") || is(v, q - 1, "if") ||
                          is(v, q - 1, "switch"))) {
                *lo = tk(v, s)->off;
                return 1;
            }
            s = q;
            continue;
        }
        s = p;
    }
    return 0;
}

size_t rl_tok_at(const sview *v, size_t off)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tk(v, mid)->off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n ? lo : v->n - 1;
}

int rl_in_lambda(const sview *v, size_t i)
{
    for (size_t b = 0; b < i; b++) {
        if (!is(v, b, "{") || close_of(v, b) < i)
            continue;
        size_t k = b;
        while (k > 0 && (is(v, k - 1, "mutable") || is(v, k - 1, "noexcept")))
            k--;
        if (k > 0 && is(v, k - 1, ")")) {
            int d = 0;
            for (k = k - 1; k > 0; k--) {
                d += is(v, k, ")") - is(v, k, "(");
                if (d == 0)
                    break;
            }
        }
        if (k > 0 && is(v, k - 1, "]"))
            return 1;
    }
    return 0;
}

int rl_is_define(const char *src, size_t len)
{
    size_t k = 0;
    while (k < len && (src[k] == '#' || src[k] == ' ' || src[k] == '\t'))
        k++;
    return len - k >= 6 && memcmp(src + k, "define", 6) == 0;
}

size_t rl_line_start(const char *s, size_t off)
{
    while (off > 0 && s[off - 1] != '\n')
        off--;
    return off;
}

size_t rl_line_after(const char *s, size_t off)
{
    while (s[off] && s[off] != '\n')
        off++;
    return s[off] ? off + 1 : off;
}

const char *const rl_host_collectives[] = {
    "ncclAllGather", "ncclReduceScatter", "ncclAllReduce", "ncclSend",     "ncclRecv",
    "ncclBroadcast", "ncclBcast",         "ncclReduce",    "ncclAllToAll", "ncclAlltoAll",
    "ncclAllToAllv", "ncclAlltoAllv",     "ncclGather",    "ncclScatter",  NULL};

const p2p_collective rl_p2p_collectives[] = {{"ncclAlltoAll", "cuco_tx::all_to_all", 6, 1},
                                             {"ncclAllToAll", "cuco_tx::all_to_all", 6, 1},
                                             {"ncclBroadcast", "cuco_tx::broadcast", 7, 1},
                                             {"ncclBcast", "cuco_tx::bcast", 6, 0},
                                             {"ncclGather", "cuco_tx::gather", 7, 1},
                                             {"ncclScatter", "cuco_tx::scatter", 7, 1},
                                             {NULL, NULL, 0, 0}};

const p2p_collective *rl_p2p_collective_of(const char *name)
{
    for (const p2p_collective *p = rl_p2p_collectives; p->name; p++)
        if (!strcmp(p->name, name))
            return p;
    return NULL;
}

int rl_called_name(const sview *v, size_t i)
{
    return ident(v, i) && is(v, i + 1, "(") && !rl_qualified(v, i);
}

size_t rl_group_end(const sview *v, size_t open)
{
    int depth = 0;
    for (size_t i = open; i < v->n; i++) {
        if (!rl_called_name(v, i))
            continue;
        if (is(v, i, "ncclGroupStart"))
            depth++;
        else if (is(v, i, "ncclGroupEnd") && --depth <= 0)
            return i;
    }
    return v->n;
}
