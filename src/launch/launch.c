/* launch.c: the entry points that choose a launcher: a run through a
 * launcher (or on this host without one) and a launcher made from CLI-style
 * settings. Above local.c and slurm.c, which never call up here. */
#include "launch_int.h"

#include <stdlib.h>
#include <string.h>

int cuco_launcher_run(const cuco_launcher *l, const cuco_launch_job *job, cuco_launch_result *r,
                      cuco_err *e)
{
    memset(r, 0, sizeof *r);
    if (!job || !job->argv || !job->argv[0])
        return cuco_err_set(e, CUCO_EINVAL, "launch: no program to run");
    if (!l)
        return cuco_launch_local_once(job, NULL, r, e);
    return l->run(l, job, r, e);
}

/* A number from an environment variable; CUCO_EINVAL naming it otherwise. */
static int env_number(const char *name, const char *text, double *out, cuco_err *e)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || v < 0)
        return cuco_err_set(e, CUCO_EINVAL, "%s=%s: expected a number >= 0", name, text);
    *out = v;
    return 0;
}

int cuco_launcher_from_kind(const char *kind, int gpu, int ranks, int slots, int gpus,
                            int shared_bench, int verify_share, cuco_launcher **out, cuco_err *e)
{
    *out = NULL;
    if (!kind || !strcmp(kind, "local")) {
        cuco_local_opts o = {.gpu = gpu,
                             .ranks = ranks,
                             .gpus = gpus,
                             .slots = slots,
                             .shared_bench = shared_bench,
                             .verify_share = verify_share};
        return cuco_launcher_local_new(&o, out, e);
    }
    if (!strcmp(kind, "slurm")) {
        /* Site settings come from the environment (docs/launch.md). */
        const char *retries = getenv("CUCO_SLURM_RETRIES");
        const char *poll_max = getenv("CUCO_SLURM_POLL_MAX_S");
        const char *partition = getenv("CUCO_SLURM_PARTITION");
        const char *gres = getenv("CUCO_SLURM_GRES");
        const char *grace = getenv("CUCO_SLURM_TIME_GRACE_S");
        const char *extra = getenv("CUCO_SLURM_SBATCH_ARGS");
        double retries_v = -1, poll_max_v = 0, grace_v = 0;
        if ((retries && *retries && env_number("CUCO_SLURM_RETRIES", retries, &retries_v, e)) ||
            (poll_max && *poll_max &&
             env_number("CUCO_SLURM_POLL_MAX_S", poll_max, &poll_max_v, e)) ||
            (grace && *grace && env_number("CUCO_SLURM_TIME_GRACE_S", grace, &grace_v, e)))
            return CUCO_EINVAL;
        launch_words words = {0}; /* the extra flags, split at blanks */
        const char **argv = NULL;
        if (extra && launch_words_split(extra, &words) < 0) {
            launch_words_free(&words);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
        argv = calloc(words.n + 1, sizeof *argv);
        if (!argv) {
            launch_words_free(&words);
            return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < words.n; i++)
            argv[i] = words.v[i];
        cuco_slurm_opts o = {
            .retries = (int)retries_v,
            .poll_max_s = poll_max_v,
            .grace_s = grace_v,
            .partition = partition && *partition ? partition : NULL,
            .gres = gres && *gres ? gres : NULL,
            .sbatch_args = argv,
        };
        int rc = cuco_launcher_slurm_new(&o, out, e);
        free(argv);
        launch_words_free(&words);
        return rc;
    }
    return cuco_err_set(e, CUCO_EINVAL, "unknown launcher '%s' (local or slurm)", kind);
}
