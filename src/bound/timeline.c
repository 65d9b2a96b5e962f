/* timeline.c: from the CUPTI timeline files (timeline.<pid>.jsonl, written
 * by tools/cupti) to per-rank figures: busy computation and communication
 * time as unions of intervals, the time both ran at once, the overlap bound
 * max(compute, comm), the ceiling serial / bound, the time each rank waited
 * for its peers inside collectives, and the kernels that take the most time.
 *
 * Waiting: the k-th communication kernel of a given name on every rank is
 * taken to be the same collective. A collective ends on all ranks at about
 * the same time, so a rank that entered it early spends the difference
 * waiting; its wait is its duration minus the shortest duration among the
 * ranks for that collective.
 *
 * Per step: each "timed" record is one cudaEventElapsedTime call of the
 * program, with the correlation ids of the two cudaEventRecord calls. The
 * GPU work launched between them (correlation ids in between, on the same
 * device) is what the program timed; its computation and communication
 * unions and its span are taken per interval, the intervals are grouped by
 * what ran (both, computation only, communication only) and the medians of
 * each group reported, so that one step of the program can be compared with
 * the figures the program prints itself. */
#include "cuco/bound.h"

#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/grow.h"
#include "cuco/stats.h"

static int cmp_interval(const void *a, const void *b)
{
    const cuco_interval *x = a, *y = b;
    return x->start < y->start   ? -1
           : x->start > y->start ? 1
                                 : (x->end < y->end ? -1 : x->end > y->end);
}

uint64_t cuco_interval_union(cuco_interval *iv, size_t n)
{
    if (n == 0)
        return 0;
    if (n > 1)
        qsort(iv, n, sizeof *iv, cmp_interval);
    uint64_t total = 0, cs = iv[0].start, ce = iv[0].end;
    for (size_t i = 1; i < n; i++) {
        if (iv[i].start > ce) {
            total += ce - cs;
            cs = iv[i].start;
            ce = iv[i].end;
        } else if (iv[i].end > ce) {
            ce = iv[i].end;
        }
    }
    return total + (ce - cs);
}

/* Merges sorted intervals in place into disjoint ones; returns the count. */
static size_t merge(cuco_interval *iv, size_t n)
{
    if (n == 0)
        return 0;
    if (n > 1)
        qsort(iv, n, sizeof *iv, cmp_interval);
    size_t m = 0;
    for (size_t i = 1; i < n; i++) {
        if (iv[i].start > iv[m].end)
            iv[++m] = iv[i];
        else if (iv[i].end > iv[m].end)
            iv[m].end = iv[i].end;
    }
    return m + 1;
}

uint64_t cuco_interval_overlap(cuco_interval *a, size_t na, cuco_interval *b, size_t nb)
{
    na = merge(a, na);
    nb = merge(b, nb);
    uint64_t total = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        uint64_t s = a[i].start > b[j].start ? a[i].start : b[j].start;
        uint64_t t = a[i].end < b[j].end ? a[i].end : b[j].end;
        if (t > s)
            total += t - s;
        if (a[i].end < b[j].end)
            i++;
        else
            j++;
    }
    return total;
}

static int ci_contains(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return 1;
    return 0;
}

int cuco_bound_is_comm_kernel(const char *name, const char *const *extra)
{
    if (!name)
        return 0;
    if (ci_contains(name, "nccl"))
        return 1;
    for (size_t i = 0; extra && extra[i]; i++)
        if (!strcmp(name, extra[i]) || (strlen(extra[i]) > 3 && strstr(name, extra[i])))
            return 1;
    return 0;
}

typedef struct event {
    char *name; /* kernels only (owned) */
    int cls;    /* 0 compute, 1 comm, 2 copy */
    uint64_t start, end;
    uint64_t corr; /* correlation id of the launching API call */
} event;

typedef struct timed_rec {
    long pid;
    int device; /* -1: unknown */
    uint64_t lo, hi;
    double ms;
} timed_rec;

typedef struct rank_events {
    int rank, device;
    long pid;
    event *ev;
    size_t n, cap;
} rank_events;

typedef struct loader {
    rank_events *r;
    size_t n, cap;
    timed_rec *timed;
    size_t n_timed, cap_timed;
} loader;

static int push_timed(loader *L, timed_rec t)
{
    if (CUCO_GROW(L->timed, L->cap_timed, L->n_timed + 1, 64) != 0)
        return CUCO_ENOMEM;
    L->timed[L->n_timed++] = t;
    return 0;
}

static rank_events *rank_of(loader *L, long pid, int rank, int device)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->r[i].pid == pid && L->r[i].device == device)
            return &L->r[i];
    if (CUCO_GROW(L->r, L->cap, L->n + 1, 8) != 0)
        return NULL;
    L->r[L->n] = (rank_events){rank, device, pid, NULL, 0, 0};
    return &L->r[L->n++];
}

static int push_event(rank_events *re, event ev)
{
    if (CUCO_GROW(re->ev, re->cap, re->n + 1, 256) != 0)
        return CUCO_ENOMEM;
    re->ev[re->n++] = ev;
    return 0;
}

static int load_file(loader *L, const char *path, const char *const *comm, long *dropped,
                     cuco_err *e)
{
    char *text = NULL;
    size_t len = 0;
    int rc = cuco_fs_read(path, &text, &len, e);
    if (rc)
        return rc;
    long pid = -1;
    int rank = -1, line_no = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        line_no++;
        if (!*cuco_str_trim(line))
            continue;
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);
        const char *type = o ? json_string_value(json_object_get(o, "type")) : NULL;
        if (!o || !type) {
            json_decref(o);
            rc = cuco_err_set_at(e, CUCO_EINVAL, path, line_no, "not a timeline record%s%s",
                                 o ? "" : ": ", o ? "" : jerr.text);
            break;
        }
        if (!strcmp(type, "process")) {
            pid = (long)json_integer_value(json_object_get(o, "pid"));
            rank = (int)json_integer_value(json_object_get(o, "rank"));
        } else if (!strcmp(type, "timed")) {
            json_t *ja = json_object_get(o, "start_correlation"),
                   *jb = json_object_get(o, "end_correlation");
            if (!json_is_integer(ja) || !json_is_integer(jb) ||
                json_integer_value(jb) <= json_integer_value(ja)) {
                rc = cuco_err_set_at(e, CUCO_EINVAL, path, line_no,
                                     "timed record without valid start/end correlations");
                json_decref(o);
                break;
            }
            json_t *jd = json_object_get(o, "device");
            timed_rec t = {pid, json_is_integer(jd) ? (int)json_integer_value(jd) : -1,
                           (uint64_t)json_integer_value(ja), (uint64_t)json_integer_value(jb),
                           json_number_value(json_object_get(o, "ms"))};
            if (push_timed(L, t)) {
                json_decref(o);
                rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                break;
            }
        } else if (!strcmp(type, "summary")) {
            *dropped += (long)json_integer_value(json_object_get(o, "dropped"));
        } else if (!strcmp(type, "kernel") || !strcmp(type, "memcpy") || !strcmp(type, "memset")) {
            json_t *js = json_object_get(o, "start"), *je = json_object_get(o, "end");
            if (!json_is_integer(js) || !json_is_integer(je) ||
                json_integer_value(je) < json_integer_value(js)) {
                rc = cuco_err_set_at(e, CUCO_EINVAL, path, line_no,
                                     "%s record without a valid start/end", type);
                json_decref(o);
                break;
            }
            json_t *jc = json_object_get(o, "correlation");
            event ev = {NULL, 2, (uint64_t)json_integer_value(js), (uint64_t)json_integer_value(je),
                        json_is_integer(jc) ? (uint64_t)json_integer_value(jc) : 0};
            if (!strcmp(type, "kernel")) {
                const char *name = json_string_value(json_object_get(o, "name"));
                ev.name = cuco_strdup(name ? name : "?");
                ev.cls = cuco_bound_is_comm_kernel(ev.name, comm) ? 1 : 0;
            } else if (!strcmp(type, "memcpy")) {
                const char *kind = json_string_value(json_object_get(o, "kind"));
                ev.cls = kind && !strcmp(kind, "PtoP") ? 1 : 2;
            }
            int device = (int)json_integer_value(json_object_get(o, "device"));
            rank_events *re = rank_of(L, pid, rank, device);
            if (!re || push_event(re, ev)) {
                free(ev.name);
                json_decref(o);
                rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                break;
            }
        }
        json_decref(o);
    }
    free(text);
    return rc;
}

static int cmp_rank(const void *a, const void *b)
{
    const rank_events *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    return x->device - y->device;
}

static int cmp_kernel(const void *a, const void *b)
{
    const cuco_bound_kernel *x = a, *y = b;
    return x->total_ms < y->total_ms   ? 1
           : x->total_ms > y->total_ms ? -1
                                       : strcmp(x->name, y->name);
}

static int figures(rank_events *re, size_t top_n, cuco_bound_rank *out)
{
    memset(out, 0, sizeof *out);
    out->rank = re->rank;
    out->pid = re->pid;
    out->device = re->device;
    cuco_interval *iv[3];
    size_t n[3] = {0, 0, 0};
    for (int c = 0; c < 3; c++)
        iv[c] = calloc(re->n + 1, sizeof **iv);
    cuco_interval *all = calloc(re->n + 1, sizeof *all);
    cuco_bound_kernel *k = calloc(re->n + 1, sizeof *k);
    size_t nk = 0, nall = 0;
    int rc = 0;
    if (!iv[0] || !iv[1] || !iv[2] || !all || !k) {
        rc = CUCO_ENOMEM;
        goto out;
    }
    uint64_t first = UINT64_MAX, last = 0;
    for (size_t i = 0; i < re->n; i++) {
        event *ev = &re->ev[i];
        iv[ev->cls][n[ev->cls]++] = (cuco_interval){ev->start, ev->end};
        if (ev->cls < 2)
            all[nall++] = (cuco_interval){ev->start, ev->end};
        if (ev->start < first)
            first = ev->start;
        if (ev->end > last)
            last = ev->end;
        if (ev->name) {
            out->n_kernels++;
            size_t j = 0;
            while (j < nk && strcmp(k[j].name, ev->name))
                j++;
            if (j == nk)
                k[nk++] = (cuco_bound_kernel){ev->name, 0, 0, 0, ev->cls == 1};
            k[j].count++;
            k[j].total_ms += (double)(ev->end - ev->start) / 1e6;
        } else {
            out->n_copies++;
        }
    }
    out->span_ms = last > first ? (double)(last - first) / 1e6 : 0;
    out->copy_ms = (double)cuco_interval_union(iv[2], n[2]) / 1e6;
    out->busy_ms = (double)cuco_interval_union(all, nall) / 1e6;
    out->overlap_ms = (double)cuco_interval_overlap(iv[0], n[0], iv[1], n[1]) / 1e6;
    out->compute_ms = (double)cuco_interval_union(iv[0], n[0]) / 1e6;
    out->comm_ms = (double)cuco_interval_union(iv[1], n[1]) / 1e6;
    out->serial_ms = out->compute_ms + out->comm_ms;
    out->bound_ms = out->compute_ms > out->comm_ms ? out->compute_ms : out->comm_ms;
    out->ceiling = out->bound_ms > 0 ? out->serial_ms / out->bound_ms : 1.0;
    if (nk > 1)
        qsort(k, nk, sizeof *k, cmp_kernel);
    out->n_top = nk < top_n ? nk : top_n;
    out->top = calloc(out->n_top + 1, sizeof *out->top);
    for (size_t j = 0; out->top && j < out->n_top; j++) {
        out->top[j] = k[j];
        out->top[j].name = cuco_strdup(k[j].name);
        out->top[j].share = out->busy_ms > 0 ? k[j].total_ms / out->busy_ms : 0;
    }
out:
    for (int c = 0; c < 3; c++)
        free(iv[c]);
    free(all);
    free(k);
    return rc;
}

/* The program's timed intervals on this rank's device: per kind, medians of
 * the computation and communication unions, the span and the event time. */
static int timed_figures(const loader *L, const rank_events *re, cuco_bound_rank *out)
{
    size_t n = 0;
    for (size_t t = 0; t < L->n_timed; t++)
        n += L->timed[t].pid == re->pid &&
             (L->timed[t].device < 0 || L->timed[t].device == re->device);
    if (n == 0)
        return 0;
    int rc = 0;
    double *v[CUCO_TIMED_KINDS][4];
    size_t nv[CUCO_TIMED_KINDS] = {0};
    cuco_interval *iv[2];
    iv[0] = calloc(re->n + 1, sizeof **iv);
    iv[1] = calloc(re->n + 1, sizeof **iv);
    for (int k = 0; k < CUCO_TIMED_KINDS; k++)
        for (int f = 0; f < 4; f++)
            v[k][f] = calloc(n, sizeof(double));
    for (int k = 0; k < CUCO_TIMED_KINDS; k++)
        for (int f = 0; f < 4; f++)
            if (!v[k][f])
                rc = CUCO_ENOMEM;
    if (!iv[0] || !iv[1] || rc) {
        rc = CUCO_ENOMEM;
        goto out;
    }
    for (size_t t = 0; t < L->n_timed; t++) {
        const timed_rec *tr = &L->timed[t];
        if (tr->pid != re->pid || (tr->device >= 0 && tr->device != re->device))
            continue;
        size_t n0 = 0, n1 = 0;
        uint64_t first = UINT64_MAX, last = 0;
        for (size_t i = 0; i < re->n; i++) {
            const event *ev = &re->ev[i];
            if (ev->corr <= tr->lo || ev->corr >= tr->hi)
                continue;
            if (ev->cls == 0)
                iv[0][n0++] = (cuco_interval){ev->start, ev->end};
            else if (ev->cls == 1)
                iv[1][n1++] = (cuco_interval){ev->start, ev->end};
            if (ev->start < first)
                first = ev->start;
            if (ev->end > last)
                last = ev->end;
        }
        if (n0 == 0 && n1 == 0)
            continue;
        out->n_timed++;
        int kind = n0 && n1 ? CUCO_TIMED_FULL : n0 ? CUCO_TIMED_COMPUTE_ONLY : CUCO_TIMED_COMM_ONLY;
        size_t j = nv[kind]++;
        v[kind][0][j] = (double)cuco_interval_union(iv[0], n0) / 1e6;
        v[kind][1][j] = (double)cuco_interval_union(iv[1], n1) / 1e6;
        v[kind][2][j] = last > first ? (double)(last - first) / 1e6 : 0;
        v[kind][3][j] = tr->ms;
    }
    for (int k = 0; k < CUCO_TIMED_KINDS; k++) {
        out->timed[k].n = (int)nv[k];
        out->timed[k].compute_ms = cuco_median(v[k][0], nv[k]);
        out->timed[k].comm_ms = cuco_median(v[k][1], nv[k]);
        out->timed[k].span_ms = cuco_median(v[k][2], nv[k]);
        out->timed[k].event_ms = cuco_median(v[k][3], nv[k]);
    }
out:
    free(iv[0]);
    free(iv[1]);
    for (int k = 0; k < CUCO_TIMED_KINDS; k++)
        for (int f = 0; f < 4; f++)
            free(v[k][f]);
    return rc;
}

/* wait per rank: for each comm kernel name, the k-th occurrence on each rank
 * is one collective; wait += duration - min duration over ranks. */
static void waits(loader *L, cuco_bound_timeline *tl)
{
    if (L->n < 2)
        return;
    for (size_t r = 0; r < L->n; r++) {
        for (size_t i = 0; i < L->r[r].n; i++) {
            event *ev = &L->r[r].ev[i];
            if (ev->cls != 1 || !ev->name)
                continue;
            /* occurrence index of this name on rank r */
            size_t occ = 0;
            for (size_t j = 0; j < i; j++)
                if (L->r[r].ev[j].cls == 1 && L->r[r].ev[j].name &&
                    !strcmp(L->r[r].ev[j].name, ev->name))
                    occ++;
            uint64_t dur = ev->end - ev->start, min = dur;
            for (size_t o = 0; o < L->n; o++) {
                if (o == r)
                    continue;
                size_t seen = 0;
                for (size_t j = 0; j < L->r[o].n; j++) {
                    event *x = &L->r[o].ev[j];
                    if (x->cls != 1 || !x->name || strcmp(x->name, ev->name))
                        continue;
                    if (seen++ == occ) {
                        if (x->end - x->start < min)
                            min = x->end - x->start;
                        break;
                    }
                }
            }
            tl->ranks[r].wait_ms += (double)(dur - min) / 1e6;
        }
    }
}

static int cmp_event_start(const void *a, const void *b)
{
    const event *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

int cuco_bound_timeline_load(const char *dir, const char *const *comm_kernels, size_t top_n,
                             cuco_bound_timeline *tl, cuco_err *e)
{
    memset(tl, 0, sizeof *tl);
    tl->critical = -1;
    loader L = {0};
    DIR *d = opendir(dir);
    if (!d)
        return cuco_err_errno(e, "cannot open timeline folder %s", dir);
    int rc = 0;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        if (strncmp(de->d_name, "timeline.", 9) || !cuco_str_ends_with(de->d_name, ".jsonl"))
            continue;
        char *path = cuco_path_join(dir, de->d_name);
        rc = load_file(&L, path, comm_kernels, &tl->dropped, e);
        free(path);
        tl->n_files++;
    }
    closedir(d);
    if (!rc && tl->n_files == 0)
        rc = cuco_err_set(e, CUCO_ENOTFOUND,
                          "no timeline.*.jsonl in %s (was the CUPTI library loaded? the program "
                          "must use the GPU)",
                          dir);
    if (!rc) {
        if (L.n > 1)
            qsort(L.r, L.n, sizeof *L.r, cmp_rank);
        for (size_t r = 0; r < L.n; r++)
            if (L.r[r].n > 1)
                qsort(L.r[r].ev, L.r[r].n, sizeof *L.r[r].ev, cmp_event_start);
        tl->ranks = calloc(L.n + 1, sizeof *tl->ranks);
        if (!tl->ranks)
            rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        for (size_t r = 0; !rc && r < L.n; r++) {
            if (figures(&L.r[r], top_n, &tl->ranks[r]) || timed_figures(&L, &L.r[r], &tl->ranks[r]))
                rc = cuco_err_set(e, CUCO_ENOMEM, "out of memory");
            tl->n_ranks = r + 1;
        }
        if (!rc)
            waits(&L, tl);
        /* The critical rank: the most time working (busy minus waiting). */
        double worst = -1;
        for (size_t r = 0; !rc && r < tl->n_ranks; r++) {
            double t = tl->ranks[r].busy_ms - tl->ranks[r].wait_ms;
            if (t > worst) {
                worst = t;
                tl->critical = (int)r;
            }
        }
    }
    for (size_t r = 0; r < L.n; r++) {
        for (size_t i = 0; i < L.r[r].n; i++)
            free(L.r[r].ev[i].name);
        free(L.r[r].ev);
    }
    free(L.r);
    free(L.timed);
    if (rc)
        cuco_bound_timeline_free(tl);
    return rc;
}

void cuco_bound_timeline_free(cuco_bound_timeline *tl)
{
    if (!tl)
        return;
    for (size_t r = 0; r < tl->n_ranks; r++) {
        for (size_t k = 0; k < tl->ranks[r].n_top; k++)
            free(tl->ranks[r].top[k].name);
        free(tl->ranks[r].top);
    }
    free(tl->ranks);
    memset(tl, 0, sizeof *tl);
    tl->critical = -1;
}
