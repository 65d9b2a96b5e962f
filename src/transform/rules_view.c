/* rules_view.c: the questions of syntax the rules ask of a program's code
 * tokens (sview.h, with their brace depth): a call's arguments, a
 * function's body, a declaration, a loop; and the NCCL names they know. */
#include "rules_int.h"

size_t rl_match_close(const view *v, size_t i)
{
    int d = 0;
    for (size_t j = i; j < v->n; j++) {
        if (rl_is(v, j, "(") || rl_is(v, j, "[") || rl_is(v, j, "{"))
            d++;
        else if (rl_is(v, j, ")") || rl_is(v, j, "]") || rl_is(v, j, "}")) {
            if (--d == 0)
                return j;
        }
    }
    return v->n;
}

void rl_call_args(const view *v, size_t open, args *a)
{
    a->n = 0;
    a->close = rl_match_close(v, open);
    if (a->close >= v->n || a->close == open + 1)
        return;
    size_t start = open + 1;
    int d = 0;
    for (size_t j = open + 1; j <= a->close; j++) {
        int at_end = j == a->close;
        if (!at_end && (rl_is(v, j, "(") || rl_is(v, j, "[") || rl_is(v, j, "{")))
            d++;
        else if (!at_end && (rl_is(v, j, ")") || rl_is(v, j, "]") || rl_is(v, j, "}")))
            d--;
        if ((at_end || (d == 0 && rl_is(v, j, ",")))) {
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

char *rl_arg_text(const view *v, const args *a, int k)
{
    size_t s = rl_tok(v, a->first[k])->off;
    return cuco_strndup(v->src + s, rl_tok_end(v, a->last[k]) - s);
}

size_t rl_chain_last(const view *v, size_t first, size_t last)
{
    size_t j = first;
    while (j <= last) {
        if (rl_is(v, j, "&") || rl_is(v, j, "*")) {
            j++;
        } else if (rl_is(v, j, "(")) {
            size_t c = rl_match_close(v, j);
            if (c >= last)
                j++; /* a parenthesized expression: look inside */
            else if (c + 1 <= last &&
                     (rl_is_ident(v, c + 1) || rl_is(v, c + 1, "&") || rl_is(v, c + 1, "(")))
                j = c + 1; /* a C cast */
            else
                j++;
        } else if (rl_is(v, j, "static_cast") || rl_is(v, j, "reinterpret_cast") ||
                   rl_is(v, j, "const_cast")) {
            while (j <= last && !rl_is(v, j, "("))
                j++;
            j++;
        } else {
            break;
        }
    }
    if (j > last || !rl_is_ident(v, j))
        return v->n;
    /* a member of an array element is that member: "layers[i].out" -> out */
    size_t end = j;
    for (;;) {
        size_t k = end + 1;
        while (k <= last && rl_is(v, k, "[")) {
            size_t c = rl_match_close(v, k);
            if (c > last)
                break;
            k = c + 1;
        }
        if (k + 1 <= last &&
            (rl_is(v, k, ".") || rl_is(v, k, "->") || (k == end + 1 && rl_is(v, k, "::"))) &&
            rl_is_ident(v, k + 1)) {
            end = k + 1;
            continue;
        }
        break;
    }
    return end;
}

int rl_has_group_calls(const view *v)
{
    for (size_t i = 0; i < v->n; i++)
        if (rl_is(v, i, "ncclGroupStart"))
            return 1;
    return 0;
}

int rl_qualified(const view *v, size_t i)
{
    return i > 0 && (rl_is(v, i - 1, ".") || rl_is(v, i - 1, "->") || rl_is(v, i - 1, "::"));
}

int rl_is_p2p_name(const char *name)
{
    return !strcmp(name, "ncclSend") || !strcmp(name, "ncclRecv");
}

int rl_is_keyword(const view *v, size_t i)
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
        if (rl_is(v, i, *k))
            return 1;
    return 0;
}

size_t rl_function_body(const view *v, size_t open)
{
    size_t j = rl_match_close(v, open);
    if (j >= v->n)
        return 0;
    j++;
    while (j < v->n && (rl_is(v, j, "const") || rl_is(v, j, "noexcept") ||
                        rl_is(v, j, "override") || rl_is(v, j, "final") || rl_is(v, j, "mutable")))
        j++;
    if (rl_is(v, j, ":")) { /* constructor initializers: "a_(a), b_{b} {" */
        for (j++;
             j < v->n && rl_is_ident(v, j) && (rl_is(v, j + 1, "(") || rl_is(v, j + 1, "{"));) {
            j = rl_match_close(v, j + 1) + 1;
            if (rl_is(v, j, ","))
                j++;
            else
                break;
        }
    }
    return j < v->n && rl_is(v, j, "{") ? j : 0;
}

size_t rl_call_open(const view *v, size_t i)
{
    if (rl_is(v, i + 1, "("))
        return i + 1;
    if (!rl_is(v, i + 1, "<"))
        return v->n;
    int d = 0;
    for (size_t j = i + 1; j < v->n && j < i + 64; j++) {
        if (rl_is(v, j, "<"))
            d++;
        else if (rl_is(v, j, ">"))
            d--;
        else if (rl_is(v, j, ">>"))
            d -= 2;
        else if (rl_is(v, j, ";") || rl_is(v, j, "{") || rl_is(v, j, "}") || rl_is(v, j, "<<<") ||
                 rl_is(v, j, "&&") || rl_is(v, j, "||"))
            return v->n;
        if (d <= 0)
            return d == 0 && rl_is(v, j + 1, "(") ? j + 1 : v->n;
    }
    return v->n;
}

size_t rl_def_params(const view *v, size_t name_tok)
{
    if (rl_is(v, name_tok + 1, "("))
        return name_tok + 1;
    if (rl_is(v, name_tok + 1, "=") && rl_is(v, name_tok + 2, "[")) {
        size_t c = rl_match_close(v, name_tok + 2);
        if (c + 1 < v->n && rl_is(v, c + 1, "("))
            return c + 1;
    }
    return v->n;
}

int rl_param_index(const view *v, size_t open, const char *name)
{
    args p;
    rl_call_args(v, open, &p);
    for (int k = 0; k < p.n; k++) {
        size_t last = p.last[k];
        for (size_t j = p.first[k]; j <= p.last[k]; j++)
            if (rl_is(v, j, "=")) {
                last = j - 1;
                break;
            }
        while (last > p.first[k] && rl_is(v, last, "]")) {
            size_t j = last;
            while (j > p.first[k] && !rl_is(v, j, "["))
                j--;
            last = j - 1;
        }
        if (last > p.first[k] && rl_is_ident(v, last) && cuco_tok_is(&v->lx, rl_tok(v, last), name))
            return k;
    }
    return -1;
}

size_t rl_after_brackets(const view *v, size_t i)
{
    while (i < v->n && rl_is(v, i, "["))
        i = rl_match_close(v, i) + 1;
    return i < v->n ? i : v->n;
}

int rl_declares_variable(const view *v, size_t i)
{
    if (!rl_declares(v, i))
        return 0;
    size_t p = i - 1;
    while (p > 0 && (rl_is(v, p, "*") || rl_is(v, p, "&")))
        p--;
    if (!rl_is(v, p, ","))
        return 1;
    size_t k = i;
    while (k > 0) {
        size_t q = k - 1;
        if (rl_is(v, q, ")") || rl_is(v, q, "]") || rl_is(v, q, "}")) {
            int d = 0; /* skip the group back to its opener */
            for (; q > 0; q--) {
                if (rl_is(v, q, ")") || rl_is(v, q, "]") || rl_is(v, q, "}"))
                    d++;
                else if ((rl_is(v, q, "(") || rl_is(v, q, "[") || rl_is(v, q, "{")) && --d == 0)
                    break;
            }
            k = q;
            continue;
        }
        if (rl_is(v, q, "(") || rl_is(v, q, "[") || rl_is(v, q, "{") || rl_is(v, q, ";") ||
            rl_is(v, q, ":"))
            break;
        k = q;
    }
    return rl_is_ident(v, k) && !rl_is_keyword(v, k) &&
           (rl_is_ident(v, k + 1) || rl_is(v, k + 1, "*") || rl_is(v, k + 1, "&") ||
            rl_is(v, k + 1, "<") || rl_is(v, k + 1, "::"));
}

int rl_stores_through(const view *v, size_t i)
{
    size_t s = i;
    while (s >= 2 && (rl_is(v, s - 1, "->") || rl_is(v, s - 1, ".")) && rl_is_ident(v, s - 2))
        s -= 2;
    if (s > 0 && rl_is(v, s - 1, "(") && rl_is(v, i + 1, ")"))
        s--;
    if (s == 0 || !rl_is(v, s - 1, "*"))
        return 0;
    /* after ';', '{', '}', ')' or '(' the '*' dereferences; after a type
     * ("float *p = v") or a ',' of a declaration list it declares */
    return s < 2 || rl_is(v, s - 2, ";") || rl_is(v, s - 2, "{") || rl_is(v, s - 2, "}") ||
           rl_is(v, s - 2, ")") || rl_is(v, s - 2, "(");
}

size_t rl_enclosing_function(const view *v, size_t i)
{
    size_t best = v->n;
    for (size_t f = 0; f + 1 < i; f++) {
        size_t open = rl_is_ident(v, f) && !rl_is_keyword(v, f) ? rl_def_params(v, f) : v->n;
        if (open >= v->n)
            continue;
        size_t body = rl_function_body(v, open);
        if (body && body < i && rl_match_close(v, body) > i)
            best = f;
    }
    return best;
}

int rl_declares(const view *v, size_t i)
{
    if (i == 0 || !(rl_is(v, i + 1, ";") || rl_is(v, i + 1, ",") || rl_is(v, i + 1, "=") ||
                    rl_is(v, i + 1, "(") || rl_is(v, i + 1, "{") || rl_is(v, i + 1, "[")))
        return 0;
    size_t p = i - 1;
    while (p > 0 && (rl_is(v, p, "*") || rl_is(v, p, "&")))
        p--;
    return (rl_is_ident(v, p) && !rl_is_keyword(v, p) && !rl_is(v, p, "new") &&
            !rl_is(v, p, "delete") && !rl_is(v, p, "goto")) ||
           rl_is(v, p, ">") || rl_is(v, p, ">>") ||
           (rl_is(v, p, ",") && p > 0 && v->depth[p] == v->depth[i]);
}

size_t rl_declaration_of(const view *v, const char *s, size_t len)
{
    for (size_t i = 0; i < v->n; i++)
        if (rl_tok(v, i)->len == len && !memcmp(v->src + rl_tok(v, i)->off, s, len) &&
            rl_declares(v, i))
            return i;
    return v->n;
}

int rl_in_list(const char *const *l, const view *v, size_t i)
{
    for (; *l; l++)
        if (cuco_tok_is(&v->lx, rl_tok(v, i), *l))
            return 1;
    return 0;
}

int rl_str_in(const char *const *l, const char *s)
{
    for (; *l; l++)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

size_t rl_top_start(const view *v, size_t i)
{
    while (i > 0 && v->scope[i] > 0)
        i--;
    return i;
}

int rl_in_loop(const view *v, size_t i)
{
    for (size_t f = 0; f < i; f++) {
        size_t body;
        if ((rl_is(v, f, "for") || rl_is(v, f, "while")) && rl_is(v, f + 1, "("))
            body = rl_match_close(v, f + 1) + 1;
        else if (rl_is(v, f, "do"))
            body = f + 1;
        else
            continue;
        if (body >= v->n || body > i)
            continue;
        size_t end = body;
        if (rl_is(v, body, "{")) {
            end = rl_match_close(v, body);
        } else {
            int d = 0;
            for (; end < v->n; end++) {
                if (rl_is(v, end, "(") || rl_is(v, end, "[") || rl_is(v, end, "{"))
                    d++;
                else if (rl_is(v, end, ")") || rl_is(v, end, "]") || rl_is(v, end, "}"))
                    d--;
                else if (d == 0 && rl_is(v, end, ";"))
                    break;
            }
        }
        if (i < end)
            return 1;
    }
    return 0;
}

int rl_control_body(const view *v, size_t i, size_t *lo)
{
    size_t s = i;
    while (s > 0) {
        size_t p = s - 1;
        if (rl_is(v, p, ";") || rl_is(v, p, "{") || rl_is(v, p, "}"))
            break;
        if (rl_is(v, p, "else") || rl_is(v, p, "do")) {
            *lo = rl_tok(v, s)->off;
            return 1;
        }
        if (rl_is(v, p, ")")) {
            int d = 0;
            size_t q = p;
            for (;; q--) {
                if (rl_is(v, q, ")"))
                    d++;
                else if (rl_is(v, q, "(") && --d == 0)
                    break;
                if (q == 0)
                    return 0;
            }
            if (q > 0 && (rl_is(v, q - 1, "for") || rl_is(v, q - 1, "while") ||
                          rl_is(v, q - 1, "if") || rl_is(v, q - 1, "switch"))) {
                *lo = rl_tok(v, s)->off;
                return 1;
            }
            s = q;
            continue;
        }
        s = p;
    }
    return 0;
}

size_t rl_tok_at(const view *v, size_t off)
{
    size_t lo = 0, hi = v->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rl_tok(v, mid)->off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < v->n ? lo : v->n - 1;
}

int rl_in_lambda(const view *v, size_t i)
{
    for (size_t b = 0; b < i; b++) {
        if (!rl_is(v, b, "{") || rl_match_close(v, b) < i)
            continue;
        size_t k = b;
        while (k > 0 && (rl_is(v, k - 1, "mutable") || rl_is(v, k - 1, "noexcept")))
            k--;
        if (k > 0 && rl_is(v, k - 1, ")")) {
            int d = 0;
            for (k = k - 1; k > 0; k--) {
                d += rl_is(v, k, ")") - rl_is(v, k, "(");
                if (d == 0)
                    break;
            }
        }
        if (k > 0 && rl_is(v, k - 1, "]"))
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
