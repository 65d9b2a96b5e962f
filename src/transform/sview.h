/* sview.h: a program's code tokens (comments and preprocessor lines left
 * out) with the few questions the schedule scans ask of them: what a token
 * is, where a bracket closes, where a call's argument lies, which block and
 * which function holds a token. Shared by
 * schedule_scan.c, send_made.c and rank_branch.c. */
#ifndef CUCO_TRANSFORM_SVIEW_H
#define CUCO_TRANSFORM_SVIEW_H

#include "cuco/analyze.h"
#include "cuco/err.h"

#include <stddef.h>

typedef struct sview {
    const char *src;
    cuco_lex lx;
    size_t *ix; /* code token -> lexer token */
    int *depth; /* per code token: the brace depth before it */
    int *scope; /* the same, namespace and extern "C" braces left out (0: file scope) */
    size_t n;
    size_t *defs;       /* the name tokens of the function definitions (name(...) {), in order */
    size_t *def_bodies; /* the '{' of each */
    size_t ndefs;
    struct sview_memo *memo;       /* what a scan computes once for the whole file */
    struct sview_memo *macro_memo; /* the macros of the file and its headers, indexed */
    cuco_lex macros; /* the #define lines of the program's headers (sview_add_macros) */
    int has_macros;
} sview;

/* Adds the #define lines of the program's own headers (text, kept by
 * reference), read after the file's own when a scan asks what a macro's
 * text is. */
int sview_add_macros(sview *v, const char *text, cuco_err *e);

/* One result a scan keeps for the file's lifetime in this view (data, freed
 * with free_data by sview_close); the slot is writable through a const view. */
struct sview_memo {
    void *data;
    void (*free_data)(void *);
};

/* Lexes src (kept by reference) into its code tokens with their brace
 * depth; sview_close frees what it made. */
int sview_open(sview *v, const char *src, cuco_err *e);
void sview_close(sview *v);

/* The next function definition after index *at of v->defs whose name reads
 * like token name (not name itself): its name token, *at moved past it, its
 * '{' into *body (when not NULL); v->n when there is none. Start with
 * *at = 0. */
size_t sview_next_def(const sview *v, size_t name, size_t *at, size_t *body);

/* The line of the first conditional directive between the bytes from and
 * to that leaves the code before it and the code after it in different
 * branches (an #else, #elif or #endif of a group opened before from, or an
 * #if whose group is still open at to), its offset in *cut; 0: none (every
 * group in between is whole). */
int sview_conditional_cut(const sview *v, size_t from, size_t to, size_t *cut);

/* Whether the ':' at k ends a label of a switch ("case 1:", "default:"). */
int sview_case_colon(const sview *v, size_t k);
/* Whether, walking back from token i in its statement and outside the
 * parentheses around it, word comes before a ';', '{', '}', the '(' that
 * opens them or stop. */
int sview_back_to(const sview *v, size_t i, const char *word, const char *stop);

/* Whether token i is `get` of `x.get()` (a smart pointer's raw value, no
 * argument): it reads only its object. */
int sview_smart_get(const sview *v, size_t i);

const cuco_tok *tk(const sview *v, size_t i);
int is(const sview *v, size_t i, const char *s);
int ident(const sview *v, size_t i);
int in_words(const sview *v, size_t i, const char *const *w);
/* Whether token i spells one of the n strings of items (a cuco_strlist's). */
int in_list(const sview *v, size_t i, char *const *items, size_t n);
/* The line of the first conditional directive (#if, #ifdef, #ifndef, #elif,
 * #else, #endif) between code tokens a and b (a < b; b may be v->n: the
 * file's end); 0 when there is none. Code on its two sides may be compiled
 * apart. */
int sview_conditional_between(const sview *v, size_t a, size_t b);
/* Whether the '{' at brace opens the body of a class or a struct. */
int sview_class_body(const sview *v, size_t brace);
/* The first token of the member declaration that holds token k in the
 * class body at brace (after the ';', brace or access label before it). */
size_t sview_member_decl_start(const sview *v, size_t brace, size_t k);
/* Whether the method named at token m, called with no arguments on an
 * object (`obj.data()`, `p->get()`), is a getter: every definition of that
 * name in the file is inside a class or struct body, takes no parameter,
 * and its body is `return [this->]NAME;` for a data member NAME its class
 * declares, not static. Such a call only names its object. *member: the
 * token of NAME when every definition returns the same name, else v->n. */
int sview_getter(const sview *v, size_t m, size_t *member);
/* The member a getter returns (`T *data() { return ptr_; }`: ptr_), for
 * RAII buffer classes to reach their allocation; m itself when m is no
 * getter of one member name. */
size_t sview_accessor_member(const sview *v, size_t m);
/* Whether tokens a and b have the same text. */
int same_tok(const sview *v, size_t a, size_t b);
/* Whether token ranges [a, b) and [x, y) spell the same text, token by token. */
int same_range(const sview *v, size_t a, size_t b, size_t x, size_t y);
/* Whether token i is an NCCL name (an identifier starting with "nccl"). */
int nccl_name(const sview *v, size_t i);
/* The '(' or '[' that the ')' or ']' at close closes, scanning back; v->n
 * when unbalanced. */
size_t sview_open_of(const sview *v, size_t close);
/* The text of tokens [a, b) (b > a), malloc'd; NULL when out of memory. */
char *sview_text(const sview *v, size_t a, size_t b);
/* Index of the bracket that closes the one at i (v->n when unbalanced); of
 * the '>>>' that closes a launch configuration at a '<<<'. */
size_t close_of(const sview *v, size_t i);
/* Token range [*a, *b) of argument k of the call whose '(' (or the launch
 * configuration whose '<<<') is at open (k < 0: the last); 0 when there is
 * no such argument. */
int arg_range(const sview *v, size_t open, int k, size_t *a, size_t *b);
/* The same for parameter k of the parameter list at open, whose template
 * arguments hold commas of their own (std::array<float *, 4> &g). */
int sview_param_range(const sview *v, size_t open, int k, size_t *a, size_t *b);
/* The start of the `#pragma` lines right before the line that starts at ls
 * in src (they bind to the statement after them); ls when none. */
size_t sview_pragma_lines_before(const char *src, size_t ls);
/* The name token of parameter k of the parameter list at open (the last
 * name before any default value); v->n when it has none. */
size_t sview_param_name(const sview *v, size_t open, int k);
/* The position of the parameter declared as name in the parameter list
 * opening at open ("float *dst", "const T *x = nullptr", "float v[]";
 * template arguments' commas are no separators there); -1 when none. */
int sview_param_index(const sview *v, size_t open, const char *name);
/* The token after template arguments `<...>` at i (`f<float>(`: the '('), i
 * itself when none start there. */
size_t sview_after_template_args(const sview *v, size_t i);
/* When token i starts an aggregate of a struct of the file (`T{a, b}`,
 * `T x{a, b}`, `T x = {a, b}`) that declares the data member member: the
 * first token of that member's value in it; v->n otherwise. */
size_t sview_aggregate_value(const sview *v, size_t i, const char *member);
/* The token ranges [from[i], to[i]) of the call's non-empty arguments, in
 * order, at most max; returns how many. */
int arg_ranges(const sview *v, size_t open, size_t *from, size_t *to, int max);
/* How many arguments the call at open has. */
int arg_count(const sview *v, size_t open);
/* Position of the parameter called name (len bytes) in the parameter list
 * whose '(' is at open (template arguments and default values skipped);
 * -1: none. */
int param_position(const sview *v, size_t open, const char *name, size_t len);

/* The position of the top-level argument that holds token k in the call
 * whose '(' is at open (0: the first). */
int sview_arg_position(const sview *v, size_t open, size_t k);
/* The '(' of the parentheses that token i sits in, within its statement (a
 * call's arguments, a parameter list, a condition); v->n when none. */
size_t sview_paren_around(const sview *v, size_t i);

/* Statement keywords (NULL-terminated): never a call's or a variable's name. */
extern const char *const sview_keywords[];
/* Whether identifier k is the name a declaration declares: after a type
 * word (not a statement keyword), '*' or '&', and before one of the tokens
 * of follow (space-separated, e.g. "= ; ,"); "&k ," is an address in a
 * list, not a declaration. */
int sview_declarator(const sview *v, size_t k, const char *follow);
/* The '{' of the block that holds token i (v->n: none). */
size_t block_open(const sview *v, size_t i);
/* The '(' of the parameter list when the block at brace is a function's (or
 * a lambda's: *lambda = 1) body; v->n otherwise. */
size_t params_of(const sview *v, size_t brace, int *lambda);
/* The '{' of the body of the innermost named function (not a lambda) that
 * holds token i; v->n when none (file scope). */
size_t function_body_of(const sview *v, size_t i);
/* When token i names a lambda its function defines before it (`auto f =
 * [&](float *p) { ... };`): the '{' of its body (*params: the '(' of its
 * parameters, when not NULL); v->n otherwise. */
size_t sview_lambda_body(const sview *v, size_t i, size_t *params);
/* Whether token i calls the function named like token f: not f itself, not
 * a member's namesake (".", "->", "::" before it), not a definition. */
int call_of(const sview *v, size_t i, size_t f);

/* The cuBLAS GEMM calls the schedules route (split_scan.c): the glue
 * names of the consumer split, the producer split and send_as_produced's
 * record, the argument count and the positions of the operands A, B and C. */
typedef struct gemm_api {
    const char *name, *glue, *produce_glue, *record_glue;
    int nargs, a, b, c;
} gemm_api;

/* The GEMM API called at token i (its name), or NULL. */
const gemm_api *gemm_at(const sview *v, size_t i);

#endif
