/* report_plot.c: the report's SVG plots: the search curve (best score so far
 * over evaluations, every score as a point) and the lineage (programs by
 * generation and island, an edge from each parent). gnuplot's svg terminal
 * draws them when it is installed; otherwise a built-in SVG writer does, so
 * a report never lacks its plots. */
#include "cuco/report.h"

#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuco/fs.h"
#include "cuco/grow.h"
#include "cuco/log.h"
#include "cuco/proc.h"
#include "cuco/run_view.h"

typedef struct plot_program {
    int64_t id, parent, parent2;
    int island, generation, ok;
    int held_back; /* re-timed beside the run's best and did not hold */
    double score;  /* < 0 when none */
    double best;   /* best score so far (cuco/run_view.h); < 0 while none */
    double x, y;   /* lineage position */
} plot_program;

/* The run's evaluated programs in id order, as every view sees them
 * (cuco/run_view.h: held back, best so far); *out malloc'd. */
static int load_programs(sqlite3 *h, int64_t run_id, plot_program **out, size_t *n, cuco_err *e)
{
    run_view_program *view;
    size_t nview;
    *out = NULL;
    *n = 0;
    int rc = run_view_programs(h, run_id, &view, &nview, e);
    if (rc < 0)
        return rc;
    *out = calloc(nview ? nview : 1, sizeof **out);
    if (!*out) {
        run_view_programs_free(view, nview);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < nview; i++) {
        plot_program *p = &(*out)[i];
        p->id = view[i].id;
        p->parent = view[i].parent_id;
        p->parent2 = view[i].second_parent_id;
        p->island = view[i].island;
        p->generation = view[i].generation;
        p->ok = view[i].ok;
        p->held_back = view[i].held_back;
        p->score = view[i].score;
        p->best = view[i].best_so_far;
    }
    *n = nview;
    run_view_programs_free(view, nview);
    return 0;
}

/* Lineage layout: x = generation; islands are bands of rows, the programs of
 * one (island, generation) stack in rows. Returns the number of rows. */
static int layout_lineage(plot_program *ps, size_t n)
{
    int max_island = 0, max_gen = 0;
    for (size_t i = 0; i < n; i++) {
        if (ps[i].island > max_island)
            max_island = ps[i].island;
        if (ps[i].generation > max_gen)
            max_gen = ps[i].generation;
    }
    int row = 0;
    for (int isl = 0; isl <= max_island; isl++) {
        int rows = 0;
        for (int g = 0; g <= max_gen; g++) {
            int k = 0;
            for (size_t i = 0; i < n; i++)
                if (ps[i].island == isl && ps[i].generation == g) {
                    ps[i].x = g;
                    ps[i].y = row + k;
                    k++;
                }
            if (k > rows)
                rows = k;
        }
        row += rows ? rows + 1 : 0;
    }
    return row;
}

/* The first row of island isl's band, or -1 when it has no program. */
static double island_first_row(const plot_program *ps, size_t n, int isl)
{
    double first = -1;
    for (size_t i = 0; i < n; i++)
        if (ps[i].island == isl && (first < 0 || ps[i].y < first))
            first = ps[i].y;
    return first;
}

static int max_island_of(const plot_program *ps, size_t n)
{
    int m = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].island > m)
            m = ps[i].island;
    return m;
}

static const plot_program *find_program(const plot_program *ps, size_t n, int64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ps[i].id == id)
            return &ps[i];
    return NULL;
}

static const char *const island_colors[] = {"#2f6fde", "#d9480f", "#2b8a3e", "#ae3ec9",
                                            "#e8590c", "#1098ad", "#5c940d", "#c2255c"};
#define N_COLORS (sizeof island_colors / sizeof island_colors[0])

/* Runs gnuplot on script; on success appends its SVG (prolog stripped) to
 * out and returns 1; 0 when gnuplot is missing or failed (logged). */
static int run_gnuplot(const char *script, cuco_buf *out)
{
    char *gp = cuco_which("gnuplot");
    if (!gp)
        return 0;
    free(gp);
    char path[] = "/tmp/cuco-plot-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    size_t len = strlen(script);
    int wrote = write(fd, script, len) == (ssize_t)len;
    close(fd);
    int used = 0;
    if (wrote) {
        const char *argv[] = {"gnuplot", path, NULL};
        cuco_proc_opts o = {0};
        o.argv = argv;
        o.timeout_s = 60;
        o.capture_cap = 16 * 1024 * 1024;
        cuco_proc_result r;
        cuco_err e = CUCO_ERR_INIT;
        if (cuco_proc_run(&o, &r, &e) == 0) {
            const char *svg = r.out ? strstr(r.out, "<svg") : NULL;
            if (r.exited && r.exit_code == 0 && svg && strstr(svg, "</svg>")) {
                used = cuco_buf_puts(out, svg) == 0;
            } else
                cuco_warn("gnuplot failed (%s): %.300s; using the built-in plots",
                          r.exited ? "exit status" : "killed", r.err ? r.err : "");
            cuco_proc_result_free(&r);
        } else
            cuco_warn("cannot run gnuplot: %s", cuco_err_msg(&e));
        cuco_err_clear(&e);
    }
    unlink(path);
    return used;
}

static void svg_header(cuco_buf *out, int w, int hgt, const char *title)
{
    cuco_buf_printf(out,
                    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\""
                    " viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
                    "<title>%s</title>\n<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n",
                    w, hgt, w, hgt, title, w, hgt);
}

/* A y axis that fits the scores: from a round value at or under the lowest
 * to one at or over the highest, in 3 to 6 steps of 1, 2, 2.5 or 5 times a
 * power of ten (so ticks read 1.2, 1.4, ..., not 0.45, 0.91). */
typedef struct axis {
    double lo, hi, step;
} axis;

static axis nice_axis(double lo, double hi)
{
    if (!(hi > lo)) {
        lo = lo > 0.5 ? lo - 0.5 : 0;
        hi = lo + 1;
    }
    double raw = (hi - lo) / 4, pow10 = 1;
    while (pow10 * 10 <= raw)
        pow10 *= 10;
    while (pow10 > raw)
        pow10 /= 10;
    static const double mult[] = {1, 2, 2.5, 5, 10};
    double step = pow10 * 10;
    for (size_t i = 0; i < sizeof mult / sizeof mult[0]; i++)
        if (pow10 * mult[i] >= raw) {
            step = pow10 * mult[i];
            break;
        }
    axis a = {floor(lo / step) * step, ceil(hi / step) * step, step};
    if (a.lo < 0 && lo >= 0)
        a.lo = 0;
    return a;
}

/* The axis of the curve: every correct program's score. */
static axis curve_axis(const plot_program *ps, size_t n)
{
    double lo = -1, hi = -1;
    for (size_t i = 0; i < n; i++)
        if (ps[i].ok) {
            if (lo < 0 || ps[i].score < lo)
                lo = ps[i].score;
            if (ps[i].score > hi)
                hi = ps[i].score;
        }
    if (lo < 0)
        lo = hi = 1;
    double pad = (hi - lo) * 0.05;
    return nice_axis(lo - pad < 0 ? 0 : lo - pad, hi + pad);
}

/* gnuplot's script of the curve: the best-so-far steps, counted points
 * filled, held back points hollow (as the caption says). */
static void curve_gnuplot_script(const plot_program *ps, size_t n, axis a, cuco_buf *s)
{
    cuco_buf_printf(s,
                    "set terminal svg size 640,320 dynamic font 'sans,10' background '#ffffff'\n"
                    "set xlabel 'evaluation'\nset ylabel 'speedup over the baseline'\n"
                    "set key left top\nset grid ytics\nset yrange [%g:%g]\nset ytics %g\n"
                    "$best << EOD\n",
                    a.lo, a.hi, a.step);
    for (size_t i = 0; i < n; i++)
        if (ps[i].best > 0)
            cuco_buf_printf(s, "%zu %.6g\n", i + 1, ps[i].best);
    for (int held = 0; held < 2; held++) {
        cuco_buf_puts(s, held ? "EOD\n$held << EOD\n" : "EOD\n$score << EOD\n");
        int any = 0;
        for (size_t i = 0; i < n; i++)
            if (ps[i].ok && ps[i].held_back == held) {
                cuco_buf_printf(s, "%zu %.6g\n", i + 1, ps[i].score);
                any = 1;
            }
        if (!any) /* gnuplot refuses an empty data block: a point off the axis */
            cuco_buf_printf(s, "0 %g\n", a.lo - a.step);
    }
    cuco_buf_printf(s, "EOD\nset xrange [0.5:%g]\n", (double)n + 0.5);
    cuco_buf_puts(s, "plot $best using 1:2 with steps lw 2 lc rgb '#1d2430' title 'best so far', "
                     "$score using 1:2 with points pt 7 ps 0.6 lc rgb '#2f6fde' title 'score', "
                     "$held using 1:2 with points pt 6 ps 0.6 lc rgb '#2f6fde'"
                     " title 'did not hold when re-timed'\n");
}

/* The built-in SVG of the curve. */
static void curve_svg(const plot_program *ps, size_t n, axis a, cuco_buf *out)
{
    const int W = 640, H = 320, L = 56, R = 16, T = 16, B = 44;
    double xmax = n > 1 ? (double)n : 2;
#define SX(x) (L + ((x)-1) / (xmax - 1) * (W - L - R))
#define SY(y) (H - B - ((y)-a.lo) / (a.hi - a.lo) * (H - T - B))
    svg_header(out, W, H, "search curve: best score over evaluations");
    cuco_buf_printf(out, "<path d=\"M%d,%d V%d H%d\" stroke=\"#888\" fill=\"none\"/>\n", L, T,
                    H - B, W - R);
    for (double y = a.lo; y <= a.hi + a.step / 1000; y += a.step)
        cuco_buf_printf(out,
                        "<path d=\"M%d,%.1f H%d\" stroke=\"#eee\"/><text x=\"%d\" y=\"%.1f\""
                        " text-anchor=\"end\">%g</text>\n",
                        L, SY(y), W - R, L - 6, SY(y) + 4, round(y / a.step) * a.step);
    cuco_buf_printf(
        out,
        "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">evaluation (1..%zu)</text>\n"
        "<text x=\"14\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 14 %d)\">"
        "speedup over the baseline</text>\n",
        (L + W - R) / 2, H - 10, n, (T + H - B) / 2, (T + H - B) / 2);
    cuco_buf_puts(out,
                  "<path class=\"best\" fill=\"none\" stroke=\"#1d2430\" stroke-width=\"2\" d=\"");
    int started = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].best > 0) {
            cuco_buf_printf(out, "%c%.1f,%.1f ", started ? 'L' : 'M', SX((double)(i + 1)),
                            SY(ps[i].best));
            started = 1;
        }
    cuco_buf_puts(out, "\"/>\n");
    for (size_t i = 0; i < n; i++)
        if (ps[i].ok)
            cuco_buf_printf(
                out,
                "<circle class=\"pt%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" %s>"
                "<title>#%lld: %.3fx%s</title></circle>\n",
                ps[i].held_back ? " held-back" : "", SX((double)(i + 1)), SY(ps[i].score),
                ps[i].held_back ? "fill=\"none\" stroke=\"#2f6fde\"" : "fill=\"#2f6fde\"",
                (long long)ps[i].id, ps[i].score,
                ps[i].held_back ? " (did not hold when re-timed)" : "");
    cuco_buf_puts(out, "</svg>\n");
#undef SX
#undef SY
}

int report_plot_curve(sqlite3 *h, int64_t run_id, int gnuplot, cuco_buf *out, int *used_gnuplot,
                      cuco_err *e)
{
    plot_program *ps;
    size_t n;
    int rc = load_programs(h, run_id, &ps, &n, e);
    if (rc < 0)
        return rc;
    axis a = curve_axis(ps, n);
    int any_best = n > 0 && ps[n - 1].best > 0;
    if (gnuplot && any_best) {
        cuco_buf s = CUCO_BUF_INIT;
        curve_gnuplot_script(ps, n, a, &s);
        int used = run_gnuplot(cuco_buf_str(&s), out);
        cuco_buf_free(&s);
        if (used) {
            *used_gnuplot = 1;
            free(ps);
            return 0;
        }
    }
    curve_svg(ps, n, a, out);
    free(ps);
    return 0;
}

int report_plot_lineage(sqlite3 *h, int64_t run_id, int gnuplot, cuco_buf *out, int *used_gnuplot,
                        cuco_err *e)
{
    plot_program *ps;
    size_t n;
    int rc = load_programs(h, run_id, &ps, &n, e);
    if (rc < 0)
        return rc;
    int rows = layout_lineage(ps, n);
    int max_gen = 0;
    for (size_t i = 0; i < n; i++)
        if (ps[i].generation > max_gen)
            max_gen = ps[i].generation;
    if (gnuplot && n > 0) {
        cuco_buf s = CUCO_BUF_INIT;
        cuco_buf_printf(&s,
                        "set terminal svg size %d,%d dynamic font 'sans,9' background '#ffffff'\n"
                        "unset key\nset xlabel 'generation'\nset yrange [%d:-1] \n"
                        "set xrange [-0.5:%g]\nset xtics 1\nset ytics scale 0 (",
                        160 + 130 * max_gen, 80 + 26 * (rows + 1), rows, max_gen + 0.8);
        /* the islands' names at the first row of their bands */
        int labels = 0;
        for (int isl = 0; isl <= max_island_of(ps, n); isl++) {
            double y = island_first_row(ps, n, isl);
            if (y >= 0)
                cuco_buf_printf(&s, "%s\"island %d\" %g", labels++ ? ", " : "", isl, y);
        }
        cuco_buf_puts(&s, ")\n$edges << EOD\n");
        for (size_t i = 0; i < n; i++) {
            const plot_program *par[2] = {find_program(ps, n, ps[i].parent),
                                          find_program(ps, n, ps[i].parent2)};
            for (int k = 0; k < 2; k++)
                if (par[k])
                    cuco_buf_printf(&s, "%g %g %g %g\n", par[k]->x, par[k]->y, ps[i].x - par[k]->x,
                                    ps[i].y - par[k]->y);
        }
        cuco_buf_puts(&s, "EOD\n$nodes << EOD\n");
        for (size_t i = 0; i < n; i++) {
            unsigned color = 0xadb5bd;
            if (ps[i].ok)
                color = (unsigned)strtoul(island_colors[(unsigned)ps[i].island % N_COLORS] + 1,
                                          NULL, 16);
            if (ps[i].ok)
                cuco_buf_printf(&s, "%g %g %u \"#%lld %.2fx%s\"\n", ps[i].x, ps[i].y, color,
                                (long long)ps[i].id, ps[i].score,
                                ps[i].held_back ? " (did not hold)" : "");
            else
                cuco_buf_printf(&s, "%g %g %u \"#%lld failed\"\n", ps[i].x, ps[i].y, color,
                                (long long)ps[i].id);
        }
        cuco_buf_puts(&s, "EOD\nplot $edges using 1:2:3:4 with vectors nohead lc rgb '#999999', "
                          "$nodes using 1:2:3 with points pt 7 ps 1.4 lc rgb variable, "
                          "$nodes using 1:2:4 with labels left offset 1,0 font 'sans,8'\n");
        int used = run_gnuplot(cuco_buf_str(&s), out);
        cuco_buf_free(&s);
        if (used) {
            *used_gnuplot = 1;
            free(ps);
            return 0;
        }
    }
    const int DX = 130, DY = 26, X0 = 70, Y0 = 34;
    int W = X0 + DX * max_gen + 110, H = Y0 + DY * (rows + 1);
    svg_header(out, W, H, "lineage: programs by generation and island");
    for (int g = 0; g <= max_gen; g++)
        cuco_buf_printf(
            out, "<text x=\"%d\" y=\"14\" text-anchor=\"middle\" fill=\"#666\">gen %d</text>\n",
            X0 + DX * g, g);
    for (int isl = 0; isl <= max_island_of(ps, n); isl++) {
        double y = island_first_row(ps, n, isl);
        if (y >= 0)
            cuco_buf_printf(
                out, "<text class=\"island\" x=\"4\" y=\"%.0f\" fill=\"%s\">island %d</text>\n",
                Y0 + DY * y + 4, island_colors[(unsigned)isl % N_COLORS], isl);
    }
    for (size_t i = 0; i < n; i++) {
        const plot_program *par[2] = {find_program(ps, n, ps[i].parent),
                                      find_program(ps, n, ps[i].parent2)};
        for (int k = 0; k < 2; k++)
            if (par[k])
                cuco_buf_printf(
                    out,
                    "<line class=\"edge\" x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\""
                    " stroke=\"#999\"%s/>\n",
                    X0 + DX * par[k]->x, Y0 + DY * par[k]->y, X0 + DX * ps[i].x, Y0 + DY * ps[i].y,
                    k ? " stroke-dasharray=\"4 3\"" : "");
    }
    for (size_t i = 0; i < n; i++) {
        const char *fill = ps[i].ok ? island_colors[(unsigned)ps[i].island % N_COLORS] : "#fbe3e1";
        cuco_buf_printf(out,
                        "<g class=\"node\"><circle cx=\"%.0f\" cy=\"%.0f\" r=\"7\" fill=\"%s\""
                        " stroke=\"%s\"/><text x=\"%.0f\" y=\"%.0f\">#%lld",
                        X0 + DX * ps[i].x, Y0 + DY * ps[i].y, fill,
                        ps[i].ok ? "#1d2430" : "#c0362c", X0 + DX * ps[i].x + 10,
                        Y0 + DY * ps[i].y + 4, (long long)ps[i].id);
        if (ps[i].ok)
            cuco_buf_printf(out, " %.2fx%s", ps[i].score, ps[i].held_back ? " (did not hold)" : "");
        else
            cuco_buf_puts(out, " failed");
        cuco_buf_printf(out, "</text><title>island %d, generation %d</title></g>\n", ps[i].island,
                        ps[i].generation);
    }
    cuco_buf_puts(out, "</svg>\n");
    free(ps);
    return 0;
}
