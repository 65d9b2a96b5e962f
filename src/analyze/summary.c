/* summary.c: the human-readable summary 'cuco analyze' prints from an
 * analysis JSON: counts, each collective with its buffers, the dependency
 * graph in compact text, and the notes. */
#include "cuco/analyze.h"

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "-";
}

static const char *field(const json_t *c, const char *f)
{
    json_t *v = json_object_get(json_object_get(json_object_get(c, "fields"), f), "text");
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int cuco_analyze_summary(const json_t *an, cuco_buf *b)
{
    json_t *graph = json_object_get(an, "graph");
    cuco_buf_printf(b,
                    "files: %zu  communicators: %zu  collectives: %zu  groups: %zu  allocations: "
                    "%zu  launches: %zu  "
                    "streams: %zu  events: %zu  syncs: %zu  notes: %zu\n",
                    json_array_size(json_object_get(an, "files")),
                    json_array_size(json_object_get(an, "communicators")),
                    json_array_size(json_object_get(an, "collectives")),
                    json_array_size(json_object_get(an, "groups")),
                    json_array_size(json_object_get(an, "allocations")),
                    json_array_size(json_object_get(an, "launches")),
                    json_array_size(json_object_get(an, "streams")),
                    json_array_size(json_object_get(an, "events")),
                    json_array_size(json_object_get(an, "syncs")),
                    json_array_size(json_object_get(an, "notes")));
    size_t i;
    json_t *c;
    if (json_array_size(json_object_get(an, "collectives")))
        cuco_buf_puts(b, "\ncollectives:\n");
    json_array_foreach(json_object_get(an, "collectives"), i, c)
    {
        cuco_buf_printf(b, "  #%zu %s:%d %s (%s) in %s", i, str(c, "file"),
                        (int)json_integer_value(json_object_get(c, "line")), str(c, "api"),
                        str(c, "classification"), str(c, "function"));
        static const char *const fs[] = {"sendbuff", "recvbuff", "buff", "count", "peer", "root"};
        for (size_t f = 0; f < sizeof fs / sizeof fs[0]; f++)
            if (field(c, fs[f]))
                cuco_buf_printf(b, " %s=%s", fs[f], field(c, fs[f]));
        cuco_buf_printf(b, " comm=%s stream=%s", str(c, "comm"), str(c, "stream"));
        json_t *g = json_object_get(c, "group");
        if (json_is_integer(g))
            cuco_buf_printf(b, " group=%d", (int)json_integer_value(g));
        json_t *l = json_object_get(c, "loop");
        if (json_is_object(l))
            cuco_buf_printf(b, " loop=%s@%d", str(l, "kind"),
                            (int)json_integer_value(json_object_get(l, "line")));
        cuco_buf_putc(b, '\n');
    }
    if (json_array_size(json_object_get(graph, "nodes")))
        cuco_buf_puts(b, "\ngraph:\n");
    json_array_foreach(json_object_get(graph, "nodes"), i, c)
    {
        cuco_buf_printf(b, "  n%zu %s %s [%s] line %d stream=%s", i, str(c, "kind"),
                        str(c, "label"), str(c, "function"),
                        (int)json_integer_value(json_object_get(c, "line")), str(c, "stream"));
        size_t j;
        json_t *e;
        int first = 1;
        json_array_foreach(json_object_get(graph, "edges"), j, e)
        {
            if ((size_t)json_integer_value(json_object_get(e, "to")) != i)
                continue;
            cuco_buf_printf(b, "%s n%d(%s:%s)", first ? "  <-" : ",",
                            (int)json_integer_value(json_object_get(e, "from")), str(e, "kind"),
                            str(e, "via"));
            first = 0;
        }
        cuco_buf_putc(b, '\n');
    }
    if (json_array_size(json_object_get(an, "notes")))
        cuco_buf_puts(b, "\nnotes:\n");
    json_array_foreach(json_object_get(an, "notes"), i, c)
    {
        cuco_buf_printf(b, "  %s:%d: %s\n", str(c, "file"),
                        (int)json_integer_value(json_object_get(c, "line")), str(c, "message"));
    }
    return 0;
}
