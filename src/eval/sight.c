/* sight.c: the folders a confined build or run of a candidate sees (see
 * sight.h): nothing of the user's home, cuco's tree or the folder cuco runs
 * in but what the workload needs, so that a candidate cannot print another
 * file into what cuco stores and shows a model. */
#include "sight.h"

#include "cuco/buf.h"
#include "cuco/fs.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rebuilds the NULL-terminated view of l. */
static int make_view(const cuco_strlist *l, const char ***view)
{
    const char **v = calloc(l->n + 1, sizeof *v);
    if (!v)
        return CUCO_ENOMEM;
    for (size_t i = 0; i < l->n; i++)
        v[i] = l->items[i];
    free(*view);
    *view = v;
    return 0;
}

int eval_sight_add(eval_sight *s, const char *dir)
{
    if (!dir || dir[0] != '/')
        return 0;
    for (size_t i = 0; i < s->visible.n; i++)
        if (!strcmp(s->visible.items[i], dir))
            return 0;
    if (cuco_strlist_push(&s->visible, dir))
        return CUCO_ENOMEM;
    return make_view(&s->visible, &s->visible_view);
}

/* A path the command names: a folder as it is, a file by its folder. */
static int add_path(eval_sight *s, const char *path)
{
    struct stat st;
    if (path[0] != '/' || stat(path, &st) != 0)
        return 0;
    if (S_ISDIR(st.st_mode))
        return eval_sight_add(s, path);
    char *dir = cuco_path_dirname(path);
    int rc = dir ? eval_sight_add(s, dir) : CUCO_ENOMEM;
    free(dir);
    return rc;
}

int eval_sight_add_args(eval_sight *s, const cuco_strlist *args)
{
    static const char *const prefixes[] = {"-isystem", "-I", "-L", NULL};
    int rc = 0;
    for (size_t i = 0; i < args->n && !rc; i++) {
        const char *a = args->items[i];
        for (size_t p = 0; prefixes[p]; p++) {
            size_t n = strlen(prefixes[p]);
            if (!strncmp(a, prefixes[p], n)) {
                /* "-I dir" as two words, or "-Idir" */
                a = a[n] ? a + n : (i + 1 < args->n ? args->items[i + 1] : "");
                break;
            }
        }
        rc = add_path(s, a);
    }
    return rc;
}

int eval_sight_add_env(eval_sight *s, const cuco_strlist *env)
{
    int rc = 0;
    for (size_t i = 0; i < env->n && !rc; i++) {
        const char *eq = strchr(env->items[i], '=');
        if (!eq)
            continue;
        char *value = cuco_strdup(eq + 1);
        char *save = NULL;
        for (char *part = value ? strtok_r(value, ":", &save) : NULL; part && !rc;
             part = strtok_r(NULL, ":", &save))
            rc = add_path(s, part);
        free(value);
    }
    return rc;
}

int eval_sight_init(eval_sight *s, const cuco_workload *w, const char *repo)
{
    memset(s, 0, sizeof *s);
    char cwd[4096];
    const char *home = getenv("HOME");
    const char *hidden[] = {home, "/root", "/home", repo, getcwd(cwd, sizeof cwd) ? cwd : NULL};
    int rc = 0;
    for (size_t i = 0; i < sizeof hidden / sizeof hidden[0] && !rc; i++)
        if (hidden[i] && hidden[i][0] == '/')
            rc = cuco_strlist_push(&s->hidden, hidden[i]) ? CUCO_ENOMEM : 0;
    if (!rc)
        rc = make_view(&s->hidden, &s->hidden_view);
    char *device = cuco_path_join(repo, "device");
    char *workloads = cuco_path_join(repo, "workloads");
    const char *visible[] = {w->dir, device, workloads};
    for (size_t i = 0; i < sizeof visible / sizeof visible[0] && !rc; i++)
        rc = eval_sight_add(s, visible[i]);
    if (!rc && !s->visible_view)
        rc = make_view(&s->visible, &s->visible_view);
    free(device);
    free(workloads);
    return rc;
}

void eval_sight_free(eval_sight *s)
{
    cuco_strlist_free(&s->hidden);
    cuco_strlist_free(&s->visible);
    free(s->hidden_view);
    free(s->visible_view);
    memset(s, 0, sizeof *s);
}
