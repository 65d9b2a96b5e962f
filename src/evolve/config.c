/* config.c: the YAML search configuration of `cuco evolve` (see config.h). */
#include "cuco/config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "cuco/buf.h"

int cuco_config_set_mutator(cuco_evolve_config *c, const char *name, cuco_err *e)
{
    for (size_t i = 0; i < c->n_mutators; i++)
        free(c->mutators[i]);
    free(c->mutators);
    free(c->weights);
    c->mutators = malloc(sizeof *c->mutators);
    c->weights = malloc(sizeof *c->weights);
    c->n_mutators = 0;
    if (!c->mutators || !c->weights || !(c->mutators[0] = cuco_strdup(name)))
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    c->weights[0] = 1.0;
    c->n_mutators = 1;
    return 0;
}

int cuco_config_defaults(cuco_evolve_config *c, cuco_err *e)
{
    memset(c, 0, sizeof *c);
    c->islands = 2;
    c->children_per_island = 2;
    c->migration_interval = 3;
    c->selection = CUCO_SEL_POWER_LAW;
    c->explore_fraction = 0.3;
    c->novelty_threshold = 0.95;
    c->novelty_judge = 0;
    c->novelty_judge_band = 0.05;
    c->archive_size = 8;
    c->slots = 1;
    c->verify_share = 4;
    c->seed = 1;
    c->repeats = 0;
    c->budget_evaluations = 30;
    c->budget_generations = 20;
    c->meta_interval = 5;
    c->retime_rounds = 2;
    c->retime_per_generation = 2;
    return cuco_config_set_mutator(c, "knob", e);
}

int cuco_config_screen_repeats(const cuco_evolve_config *c)
{
    if (c->repeats > 0)
        return c->repeats;
    return c->retime_rounds > 0 ? 1 : 0;
}

int cuco_config_is_llm_mutator(const char *name)
{
    return name && (!strcmp(name, "llm") || !strcmp(name, "llm_diff") ||
                    !strcmp(name, "llm_full") || !strcmp(name, "llm_cross"));
}

int cuco_config_add_models(cuco_evolve_config *c, const char *spec, cuco_err *e)
{
    const char *p = spec ? spec : "";
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *start = p;
        p += len;
        if (*p)
            p++;
        while (len && (*start == ' ' || *start == '\t'))
            start++, len--;
        while (len && (start[len - 1] == ' ' || start[len - 1] == '\t'))
            len--;
        if (!len)
            continue;
        int dup = 0;
        for (size_t i = 0; i < c->n_models && !dup; i++)
            dup = strlen(c->models[i]) == len && !strncmp(c->models[i], start, len);
        if (dup)
            continue;
        char **grown = realloc(c->models, (c->n_models + 1) * sizeof *grown);
        if (!grown)
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        c->models = grown;
        if (!(c->models[c->n_models] = cuco_strndup(start, len)))
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        c->n_models++;
    }
    return 0;
}

int cuco_config_add_prices(cuco_evolve_config *c, const char *spec, cuco_err *e)
{
    char *joined = c->prices ? cuco_sprintf("%s;%s", c->prices, spec) : cuco_strdup(spec);
    if (!joined)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(c->prices);
    c->prices = joined;
    return 0;
}

void cuco_config_free(cuco_evolve_config *c)
{
    for (size_t i = 0; i < c->n_mutators; i++)
        free(c->mutators[i]);
    free(c->mutators);
    free(c->weights);
    c->mutators = NULL;
    c->weights = NULL;
    c->n_mutators = 0;
    for (size_t i = 0; i < c->n_models; i++)
        free(c->models[i]);
    free(c->models);
    free(c->prices);
    c->models = NULL;
    c->prices = NULL;
    c->n_models = 0;
}

const char *cuco_selection_name(cuco_selection s)
{
    switch (s) {
    case CUCO_SEL_FITNESS:
        return "fitness";
    case CUCO_SEL_HILL_CLIMB:
        return "hill_climb";
    default:
        return "power_law";
    }
}

static int parse_num(const char *path, const yaml_node_t *v, const char *key, double lo, double hi,
                     double *out, cuco_err *e)
{
    int line = (int)v->start_mark.line + 1;
    if (v->type != YAML_SCALAR_NODE)
        return cuco_err_set_at(e, CUCO_EINVAL, path, line, "%s: expected a number", key);
    const char *s = (const char *)v->data.scalar.value;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || end == s || *end)
        return cuco_err_set_at(e, CUCO_EINVAL, path, line, "%s: '%s' is not a number", key, s);
    if (d < lo || d > hi)
        return cuco_err_set_at(e, CUCO_EINVAL, path, line, "%s: %g is out of range [%g, %g]", key,
                               d, lo, hi);
    *out = d;
    return 0;
}

static int parse_int(const char *path, const yaml_node_t *v, const char *key, double lo, double hi,
                     double *out, cuco_err *e)
{
    int rc = parse_num(path, v, key, lo, hi, out, e);
    if (rc == 0 && *out != (double)(long long)*out)
        return cuco_err_set_at(e, CUCO_EINVAL, path, (int)v->start_mark.line + 1,
                               "%s: expected an integer", key);
    return rc;
}

static int parse_bool(const char *path, const yaml_node_t *v, const char *key, int *out,
                      cuco_err *e)
{
    int line = (int)v->start_mark.line + 1;
    const char *s = v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : "";
    if (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on") || !strcmp(s, "1"))
        *out = 1;
    else if (!strcmp(s, "false") || !strcmp(s, "no") || !strcmp(s, "off") || !strcmp(s, "0"))
        *out = 0;
    else
        return cuco_err_set_at(e, CUCO_EINVAL, path, line, "%s: expected true or false", key);
    return 0;
}

static int load_doc(const char *path, yaml_document_t *doc, yaml_document_t *root_holder,
                    cuco_evolve_config *c, cuco_err *e)
{
    (void)root_holder;
    yaml_node_t *root = yaml_document_get_root_node(doc);
    if (!root)
        return 0; /* empty file: defaults */
    if (root->type != YAML_MAPPING_NODE)
        return cuco_err_set_at(e, CUCO_EINVAL, path, (int)root->start_mark.line + 1,
                               "the config must be a mapping");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        int line = (int)k->start_mark.line + 1;
        if (k->type != YAML_SCALAR_NODE)
            return cuco_err_set_at(e, CUCO_EINVAL, path, line, "keys must be names");
        const char *key = (const char *)k->data.scalar.value;
        double d;
        int rc = 0;
        if (!strcmp(key, "islands")) {
            if (!(rc = parse_int(path, v, key, 1, 64, &d, e)))
                c->islands = (int)d;
        } else if (!strcmp(key, "children_per_island")) {
            if (!(rc = parse_int(path, v, key, 1, 1024, &d, e)))
                c->children_per_island = (int)d;
        } else if (!strcmp(key, "migration_interval")) {
            if (!(rc = parse_int(path, v, key, 0, 1e6, &d, e)))
                c->migration_interval = (int)d;
        } else if (!strcmp(key, "explore_fraction")) {
            if (!(rc = parse_num(path, v, key, 0, 1, &d, e)))
                c->explore_fraction = d;
        } else if (!strcmp(key, "novelty_threshold")) {
            if (!(rc = parse_num(path, v, key, 0, 1, &d, e)))
                c->novelty_threshold = d;
        } else if (!strcmp(key, "novelty_judge")) {
            rc = parse_bool(path, v, key, &c->novelty_judge, e);
        } else if (!strcmp(key, "novelty_judge_band")) {
            if (!(rc = parse_num(path, v, key, 0, 1, &d, e)))
                c->novelty_judge_band = d;
        } else if (!strcmp(key, "archive_size")) {
            if (!(rc = parse_int(path, v, key, 1, 1e6, &d, e)))
                c->archive_size = (int)d;
        } else if (!strcmp(key, "slots")) {
            if (!(rc = parse_int(path, v, key, 1, 256, &d, e)))
                c->slots = (int)d;
        } else if (!strcmp(key, "verify_share")) {
            if (!(rc = parse_int(path, v, key, 1, 64, &d, e)))
                c->verify_share = (int)d;
        } else if (!strcmp(key, "seed")) {
            if (!(rc = parse_int(path, v, key, 0, 9.0e15, &d, e)))
                c->seed = (uint64_t)d;
        } else if (!strcmp(key, "retime_rounds")) {
            if (!(rc = parse_int(path, v, key, 0, 100, &d, e)))
                c->retime_rounds = (int)d;
        } else if (!strcmp(key, "retime_per_generation")) {
            if (!(rc = parse_int(path, v, key, 1, 1000, &d, e)))
                c->retime_per_generation = (int)d;
        } else if (!strcmp(key, "meta_interval")) {
            if (!(rc = parse_int(path, v, key, 0, 1e6, &d, e)))
                c->meta_interval = (int)d;
        } else if (!strcmp(key, "models")) {
            if (v->type == YAML_SCALAR_NODE) {
                rc = cuco_config_add_models(c, (const char *)v->data.scalar.value, e);
            } else if (v->type == YAML_SEQUENCE_NODE) {
                for (yaml_node_item_t *it = v->data.sequence.items.start;
                     it < v->data.sequence.items.top && rc == 0; it++) {
                    yaml_node_t *m = yaml_document_get_node(doc, *it);
                    if (m->type != YAML_SCALAR_NODE)
                        rc = cuco_err_set_at(e, CUCO_EINVAL, path, (int)m->start_mark.line + 1,
                                             "models: expected model names");
                    else
                        rc = cuco_config_add_models(c, (const char *)m->data.scalar.value, e);
                }
            } else {
                rc = cuco_err_set_at(e, CUCO_EINVAL, path, (int)v->start_mark.line + 1,
                                     "models: expected a list of model names");
            }
        } else if (!strcmp(key, "prices")) {
            if (v->type != YAML_SCALAR_NODE)
                rc = cuco_err_set_at(e, CUCO_EINVAL, path, (int)v->start_mark.line + 1,
                                     "prices: expected \"model=in,out[,cached];...\"");
            else
                rc = cuco_config_add_prices(c, (const char *)v->data.scalar.value, e);
        } else if (!strcmp(key, "repeats")) {
            if (!(rc = parse_int(path, v, key, 0, 1000, &d, e)))
                c->repeats = (int)d;
        } else if (!strcmp(key, "selection")) {
            const char *s = v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : "";
            if (!strcmp(s, "power_law"))
                c->selection = CUCO_SEL_POWER_LAW;
            else if (!strcmp(s, "fitness"))
                c->selection = CUCO_SEL_FITNESS;
            else if (!strcmp(s, "hill_climb"))
                c->selection = CUCO_SEL_HILL_CLIMB;
            else
                rc = cuco_err_set_at(e, CUCO_EINVAL, path, (int)v->start_mark.line + 1,
                                     "selection: '%s' is not power_law, fitness or hill_climb", s);
        } else if (!strcmp(key, "budget") || !strcmp(key, "mutators")) {
            if (v->type != YAML_MAPPING_NODE)
                return cuco_err_set_at(e, CUCO_EINVAL, path, (int)v->start_mark.line + 1,
                                       "%s: expected a mapping", key);
            int is_budget = !strcmp(key, "budget");
            if (!is_budget)
                cuco_config_free(c);
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start;
                 q < v->data.mapping.pairs.top && rc == 0; q++) {
                yaml_node_t *k2 = yaml_document_get_node(doc, q->key);
                yaml_node_t *v2 = yaml_document_get_node(doc, q->value);
                const char *key2 =
                    k2->type == YAML_SCALAR_NODE ? (const char *)k2->data.scalar.value : "";
                if (is_budget) {
                    if (!strcmp(key2, "evaluations")) {
                        if (!(rc = parse_int(path, v2, "budget.evaluations", 0, 1e9, &d, e)))
                            c->budget_evaluations = (long)d;
                    } else if (!strcmp(key2, "generations")) {
                        if (!(rc = parse_int(path, v2, "budget.generations", 0, 1e9, &d, e)))
                            c->budget_generations = (int)d;
                    } else if (!strcmp(key2, "wall_s")) {
                        if (!(rc = parse_num(path, v2, "budget.wall_s", 0, 1e9, &d, e)))
                            c->budget_wall_s = d;
                    } else if (!strcmp(key2, "usd")) {
                        if (!(rc = parse_num(path, v2, "budget.usd", 0, 1e9, &d, e)))
                            c->budget_usd = d;
                    } else {
                        rc = cuco_err_set_at(e, CUCO_EINVAL, path, (int)k2->start_mark.line + 1,
                                             "unknown key budget.%s", key2);
                    }
                } else {
                    if (!(rc = parse_num(path, v2, "mutator weight", 0, 1e9, &d, e))) {
                        char **nm = realloc(c->mutators, (c->n_mutators + 1) * sizeof *nm);
                        if (nm)
                            c->mutators = nm;
                        double *nw = realloc(c->weights, (c->n_mutators + 1) * sizeof *nw);
                        if (nw)
                            c->weights = nw;
                        if (!nm || !nw || !(c->mutators[c->n_mutators] = cuco_strdup(key2)))
                            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
                        c->weights[c->n_mutators++] = d;
                    }
                }
            }
            if (!is_budget && rc == 0 && c->n_mutators == 0)
                rc = cuco_err_set_at(e, CUCO_EINVAL, path, line, "mutators: empty");
        } else {
            rc = cuco_err_set_at(e, CUCO_EINVAL, path, line, "unknown key '%s'", key);
        }
        if (rc < 0)
            return rc;
    }
    return 0;
}

int cuco_config_load(const char *path, cuco_evolve_config *c, cuco_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return cuco_err_errno(e, "cannot open config %s", path);
    yaml_parser_t p;
    yaml_document_t doc;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_file(&p, f);
    int rc;
    if (!yaml_parser_load(&p, &doc)) {
        rc = cuco_err_set_at(e, CUCO_EINVAL, path, (int)p.problem_mark.line + 1, "YAML: %s",
                             p.problem ? p.problem : "parse error");
    } else {
        rc = load_doc(path, &doc, NULL, c, e);
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&p);
    fclose(f);
    return rc;
}

int cuco_config_validate(const cuco_evolve_config *c, cuco_err *e)
{
    if (c->islands < 1)
        return cuco_err_set(e, CUCO_EINVAL, "islands must be >= 1");
    if (c->slots < 1)
        return cuco_err_set(e, CUCO_EINVAL, "slots must be >= 1");
    if (c->verify_share < 1 || c->verify_share > 64)
        return cuco_err_set(e, CUCO_EINVAL, "verify_share must be 1 to 64");
    if (c->children_per_island < 1)
        return cuco_err_set(e, CUCO_EINVAL, "children_per_island must be >= 1");
    if (c->n_mutators == 0)
        return cuco_err_set(e, CUCO_EINVAL, "no mutator");
    double w = 0;
    for (size_t i = 0; i < c->n_mutators; i++)
        w += c->weights[i];
    if (w <= 0)
        return cuco_err_set(e, CUCO_EINVAL, "mutator weights sum to zero");
    for (size_t i = 0; i < c->n_mutators; i++)
        if (cuco_config_is_llm_mutator(c->mutators[i]) && c->n_models == 0)
            return cuco_err_set(e, CUCO_EINVAL,
                                "mutator %s needs a model (--model NAME or config models)",
                                c->mutators[i]);
    if (c->meta_interval < 0)
        return cuco_err_set(e, CUCO_EINVAL, "meta_interval must be >= 0");
    if (c->retime_rounds < 0 || c->retime_per_generation < 1)
        return cuco_err_set(e, CUCO_EINVAL,
                            "retime_rounds must be >= 0 and retime_per_generation >= 1");
    if (c->novelty_judge_band < 0 || c->novelty_judge_band > 1)
        return cuco_err_set(e, CUCO_EINVAL, "novelty_judge_band must be in [0, 1]");
    return 0;
}

char *cuco_config_json(const cuco_evolve_config *c)
{
    json_t *o = json_object();
    json_t *b = json_object();
    json_t *m = json_object();
    if (!o || !b || !m) {
        json_decref(o);
        json_decref(b);
        json_decref(m);
        return NULL;
    }
    json_object_set_new(o, "islands", json_integer(c->islands));
    json_object_set_new(o, "children_per_island", json_integer(c->children_per_island));
    json_object_set_new(o, "migration_interval", json_integer(c->migration_interval));
    json_object_set_new(o, "selection", json_string(cuco_selection_name(c->selection)));
    json_object_set_new(o, "explore_fraction", json_real(c->explore_fraction));
    json_object_set_new(o, "novelty_threshold", json_real(c->novelty_threshold));
    json_object_set_new(o, "novelty_judge", json_boolean(c->novelty_judge));
    json_object_set_new(o, "novelty_judge_band", json_real(c->novelty_judge_band));
    json_object_set_new(o, "archive_size", json_integer(c->archive_size));
    json_object_set_new(o, "slots", json_integer(c->slots));
    json_object_set_new(o, "verify_share", json_integer(c->verify_share));
    json_object_set_new(o, "seed", json_integer((json_int_t)c->seed));
    json_object_set_new(o, "repeats", json_integer(c->repeats));
    json_object_set_new(b, "evaluations", json_integer(c->budget_evaluations));
    json_object_set_new(b, "generations", json_integer(c->budget_generations));
    json_object_set_new(b, "wall_s", json_real(c->budget_wall_s));
    json_object_set_new(b, "usd", json_real(c->budget_usd));
    json_object_set_new(o, "budget", b);
    for (size_t i = 0; i < c->n_mutators; i++)
        json_object_set_new(m, c->mutators[i], json_real(c->weights[i]));
    json_object_set_new(o, "mutators", m);
    if (c->n_models) {
        json_t *ms = json_array();
        for (size_t i = 0; i < c->n_models; i++)
            json_array_append_new(ms, json_string(c->models[i]));
        json_object_set_new(o, "models", ms);
    }
    json_object_set_new(o, "meta_interval", json_integer(c->meta_interval));
    json_object_set_new(o, "retime_rounds", json_integer(c->retime_rounds));
    json_object_set_new(o, "retime_per_generation", json_integer(c->retime_per_generation));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
