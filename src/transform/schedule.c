/* schedule.c: schedule (a) of the fast path, early start / late wait.
 *
 * A communication call the rules rewrite is issued on a side stream of its
 * own once its inputs are ready (an event recorded on its stream where the
 * call was), and its stream waits for it just before the first later
 * statement of the same scope that may touch its buffers; the work in
 * between overlaps it. Two halves: cuco_sched_place_call() is the placement,
 * a pure function over a small graph (statements of one scope with their
 * buffer names, stream and kind, plus the function's pointer aliases and the
 * objects that hold copies of pointers), so it is tested apart from text;
 * cuco_sched_scan() builds that graph from the program's tokens around one
 * call and turns the placement into edits for rules_sched.c. Conservative: whatever the scan cannot
 * prove independent (an unknown call that may reach a buffer, another communication call, a
 * synchronisation, an exit from the scope) is a consumer.
 */
#include "cuco/analyze.h"
#include "cuco/buf.h"
#include "cuco/transform.h"
#include <stdlib.h>
#include <string.h>

/* ---- placement (pure) ----------------------------------------------------- */

/* Union-find over the names of the graph, by position in a name table. */
typedef struct names {
    const char **items;
    size_t *parent;
    size_t n, cap;
} names;

static size_t names_find(names *t, size_t i)
{
    while (t->parent[i] != i)
        i = t->parent[i] = t->parent[t->parent[i]];
    return i;
}

/* Index of s (added when new); (size_t)-1 when memory runs out. */
static size_t names_id(names *t, const char *s)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->items[i], s) == 0)
            return i;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 32;
        const char **it = realloc(t->items, cap * sizeof(*it));
        if (!it)
            return (size_t)-1;
        t->items = it;
        size_t *pa = realloc(t->parent, cap * sizeof(*pa));
        if (!pa)
            return (size_t)-1;
        t->parent = pa;
        t->cap = cap;
    }
    t->items[t->n] = s;
    t->parent[t->n] = t->n;
    return t->n++;
}

/* The names with their alias classes (union-find) and the holds edges
 * between classes: what touching a name touches. */
typedef struct touch_map {
    names t;
    size_t *from, *to, nholds; /* class from holds class to */
    unsigned char *scratch;    /* t.cap marks, for one name's reach */
} touch_map;

/* Marks in mark the class of name id and every class its class holds,
 * through the holds edges (transitively). */
static void mark_reach(touch_map *m, size_t id, unsigned char *mark)
{
    mark[names_find(&m->t, id)] = 1;
    for (int grew = 1; grew;) {
        grew = 0;
        for (size_t i = 0; i < m->nholds; i++)
            if (mark[m->from[i]] && !mark[m->to[i]])
                mark[m->to[i]] = grew = 1;
    }
}

/* Whether any of list[0..n) touches a class marked in mark[]: its own
 * class, or one it holds. */
static int touches(touch_map *m, const unsigned char *mark, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t id = names_id(&m->t, list[i]);
        if (id == (size_t)-1)
            continue;
        memset(m->scratch, 0, m->t.cap);
        mark_reach(m, id, m->scratch);
        for (size_t k = 0; k < m->t.n; k++)
            if (m->scratch[k] && mark[k])
                return 1;
    }
    return 0;
}

static int is_barrier(cuco_sched_kind k)
{
    return k == CUCO_SCHED_COMM || k == CUCO_SCHED_SYNC || k == CUCO_SCHED_EXIT ||
           k == CUCO_SCHED_UNKNOWN;
}

static int same_stream(const char *a, const char *b)
{
    return !a || !b || strcmp(a, b) == 0;
}

/* Marks what list[0..n) touches in mark (sized m->t.cap). */
static void mark_all(touch_map *m, unsigned char *mark, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t id = names_id(&m->t, list[i]);
        if (id != (size_t)-1)
            mark_reach(m, id, mark);
    }
}

static int place_with(const cuco_sched_graph *g, size_t call, touch_map *m, cuco_sched_place *out)
{
    const cuco_sched_node *c = &g->nodes[call];
    size_t cap = m->t.cap ? m->t.cap : 1;
    unsigned char *both = calloc(cap, 1), *wr = calloc(cap, 1);
    if (!both || !wr) {
        free(both);
        free(wr);
        return CUCO_ENOMEM;
    }
    mark_all(m, both, c->reads, c->nreads);
    mark_all(m, both, c->writes, c->nwrites);
    mark_all(m, wr, c->writes, c->nwrites);
    /* start: after the last producer of what it reads, or toucher of what it writes */
    out->issue = call;
    while (out->issue > 0) {
        const cuco_sched_node *p = &g->nodes[out->issue - 1];
        if (is_barrier(p->kind) || touches(m, both, p->writes, p->nwrites) ||
            touches(m, wr, p->reads, p->nreads))
            break;
        out->issue--;
    }
    /* wait: before the first node that touches either buffer, or a barrier */
    out->wait = g->n;
    out->independent = out->same_stream = 0;
    for (size_t i = call + 1; i < g->n; i++) {
        const cuco_sched_node *p = &g->nodes[i];
        if (is_barrier(p->kind) || touches(m, both, p->reads, p->nreads) ||
            touches(m, both, p->writes, p->nwrites)) {
            out->wait = i;
            break;
        }
        if (p->kind == CUCO_SCHED_WORK) {
            out->independent++;
            out->same_stream += same_stream(p->stream, c->stream);
        }
    }
    out->knob_default = out->same_stream > 0;
    free(both);
    free(wr);
    return 0;
}

/* Every name of g in m's table, joined by the alias pairs; the holds
 * edges between their classes. */
static int touch_map_build(const cuco_sched_graph *g, touch_map *m)
{
    names *t = &m->t;
    int rc = 0;
    /* every name first, so that the marks can be sized once */
    for (size_t i = 0; i < g->n && rc == 0; i++) {
        const cuco_sched_node *p = &g->nodes[i];
        for (size_t k = 0; k < p->nreads && rc == 0; k++)
            rc = names_id(t, p->reads[k]) == (size_t)-1 ? CUCO_ENOMEM : 0;
        for (size_t k = 0; k < p->nwrites && rc == 0; k++)
            rc = names_id(t, p->writes[k]) == (size_t)-1 ? CUCO_ENOMEM : 0;
    }
    for (size_t i = 0; i < g->naliases && rc == 0; i++) {
        size_t a = names_id(t, g->alias_a[i]), b = names_id(t, g->alias_b[i]);
        if (a == (size_t)-1 || b == (size_t)-1)
            rc = CUCO_ENOMEM;
        else
            t->parent[names_find(t, a)] = names_find(t, b);
    }
    for (size_t i = 0; i < g->nholds && rc == 0; i++)
        rc = names_id(t, g->holds_a[i]) == (size_t)-1 || names_id(t, g->holds_b[i]) == (size_t)-1
                 ? CUCO_ENOMEM
                 : 0;
    m->from = calloc(g->nholds ? g->nholds : 1, sizeof(*m->from));
    m->to = calloc(g->nholds ? g->nholds : 1, sizeof(*m->to));
    m->scratch = calloc(t->cap ? t->cap : 1, 1);
    if (rc == 0 && (!m->from || !m->to || !m->scratch))
        rc = CUCO_ENOMEM;
    for (size_t i = 0; i < g->nholds && rc == 0; i++) {
        m->from[i] = names_find(t, names_id(t, g->holds_a[i]));
        m->to[i] = names_find(t, names_id(t, g->holds_b[i]));
    }
    m->nholds = rc == 0 ? g->nholds : 0;
    return rc;
}

int cuco_sched_place_call(const cuco_sched_graph *g, size_t call, cuco_sched_place *out)
{
    if (!g || !out || call >= g->n || g->nodes[call].kind != CUCO_SCHED_COMM ||
        (g->nholds && (!g->holds_a || !g->holds_b)))
        return CUCO_EINVAL;
    touch_map m = {0};
    int rc = touch_map_build(g, &m);
    if (rc == 0)
        rc = place_with(g, call, &m, out);
    free(m.t.items);
    free(m.t.parent);
    free(m.from);
    free(m.to);
    free(m.scratch);
    return rc;
}

int cuco_sched_edit_push(cuco_sched_edit **edits, size_t *n, size_t off, size_t len, char *text,
                         size_t stmt_off)
{
    if (!text)
        return CUCO_ENOMEM;
    cuco_sched_edit *g = realloc(*edits, (*n + 1) * sizeof(*g));
    if (!g) {
        free(text);
        return CUCO_ENOMEM;
    }
    *edits = g;
    g[(*n)++] = (cuco_sched_edit){off, len, text, stmt_off};
    return 0;
}

void cuco_sched_edits_free(cuco_sched_edit *edits, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(edits[i].text);
    free(edits);
}

int cuco_sched_producer_fed(const char *api)
{
    return strcmp(api, "ncclAllReduce") == 0 || strcmp(api, "ncclReduceScatter") == 0;
}

const char *cuco_sched_consumer_split(const char *api)
{
    return strcmp(api, "ncclAllGather") == 0 || strcmp(api, "ncclAlltoAll") == 0 ||
                   strcmp(api, "ncclAllToAll") == 0
               ? "consumer_split_by_source"
           : strcmp(api, "ncclRecv") == 0 ? "consume_as_received"
                                          : NULL;
}

void cuco_sched_plan_free(cuco_sched_plan *plan)
{
    if (!plan)
        return;
    cuco_sched_edits_free(plan->edits, plan->nedits);
    free(plan->note);
    free(plan->split_note);
    free(plan->produce_note);
    free(plan->warm_note);
    memset(plan, 0, sizeof(*plan));
}
