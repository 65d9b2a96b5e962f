/* local.c: the local launcher (mpirun on this host): GPU and core
 * detection, slots, and running one job here.
 *
 * Slots: the launcher owns a fixed set of slots, each with its GPUs (a
 * CUDA_VISIBLE_DEVICES value, for GPU runs) and its own TMPDIR (OpenMPI keeps
 * its session folder there, so concurrent mpiruns never share one). A run
 * takes a free slot and gives it back when the program has ended. A run
 * marked exclusive waits until every slot is free and holds them all; while
 * one waits, new runs wait behind it, so a benchmark is not starved by a
 * stream of verification runs. With verify_share N > 1, each GPU set backs
 * N slots, so that N runs that are not exclusive (verifications at their
 * small sizes) share it, while a benchmark still has every GPU to itself.
 * Compilation does not go through here: callers compile in their own
 * threads, as many as they have. */
#include "launch_int.h"

#include "cuco/fs.h"
#include "cuco/log.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct local_slot {
    char *gpus;    /* "0,1" for CUDA_VISIBLE_DEVICES, or NULL (CPU runs) */
    char *tmp_dir; /* this slot's TMPDIR */
    int busy;
} local_slot;

typedef struct local_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    local_slot *slots;
    int n_slots;
    int active;            /* slots in use by ordinary runs */
    int exclusive_running; /* 1 while an exclusive run holds every slot */
    int exclusive_waiting; /* exclusive runs waiting for the host */
    int shared_bench;
    char *tmp_parent; /* folder holding the slots' TMPDIRs (removed on free) */
} local_state;

/* ---- public helpers ---- */

int cuco_launch_detect_gpus(void)
{
    const char *argv[] = {"nvidia-smi", "-L", NULL};
    cuco_proc_opts po = {.argv = argv, .timeout_s = 20};
    cuco_proc_result pr;
    if (cuco_proc_run(&po, &pr, NULL) != 0)
        return 0;
    int n = 0;
    if (pr.exited && pr.exit_code == 0)
        for (const char *p = pr.out; p && *p;) {
            if (!strncmp(p, "GPU ", 4))
                n++;
            const char *nl = strchr(p, '\n');
            p = nl ? nl + 1 : p + strlen(p);
        }
    cuco_proc_result_free(&pr);
    return n;
}

int cuco_launch_detect_cores(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int cuco_launch_auto_slots(int gpu, int ranks, int gpus, int cores)
{
    if (ranks < 1)
        ranks = 1;
    int n = (gpu ? gpus : cores) / ranks;
    return n > 0 ? n : 1;
}

/* ---- running one job on this host ---- */

int cuco_launch_local_once(const cuco_launch_job *job, const char *const *slot_env,
                           cuco_launch_result *r, cuco_err *e)
{
    memset(r, 0, sizeof *r);
    int n_args = launch_strv_count(job->argv), n_mpi = launch_strv_count(job->mpi_args);
    const char **argv = calloc((size_t)(n_args + n_mpi + 10), sizeof *argv);
    int n_env = launch_strv_count(job->env_set), n_slot = launch_strv_count(slot_env);
    const char **env = calloc((size_t)(n_env + n_slot + 1), sizeof *env);
    char np[32];
    if (!argv || !env) {
        free(argv);
        free(env);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    int n = 0;
    if (job->mpi) {
        snprintf(np, sizeof np, "%d", job->ranks > 0 ? job->ranks : 1);
        argv[n++] = "mpirun";
        argv[n++] = "-np";
        argv[n++] = np;
        if (geteuid() == 0)
            argv[n++] = "--allow-run-as-root";
        argv[n++] = "--bind-to";
        argv[n++] = "none";
        argv[n++] = "--oversubscribe";
        for (int i = 0; i < n_mpi; i++)
            argv[n++] = job->mpi_args[i];
    }
    for (int i = 0; i < n_args; i++)
        argv[n++] = job->argv[i];
    /* The slot's settings come last so that they win over the caller's. */
    for (int i = 0; i < n_env; i++)
        env[i] = job->env_set[i];
    for (int i = 0; i < n_slot; i++)
        env[n_env + i] = slot_env[i];
    cuco_proc_opts po = {.argv = argv,
                         .cwd = job->cwd,
                         .env_set = env,
                         .timeout_s = job->timeout_s,
                         .output_limit = job->output_limit,
                         .confine = job->confine};
    int rc = cuco_proc_run(&po, &r->proc, e);
    free(argv);
    free(env);
    if (rc)
        return rc;
    r->attempts = 1;
    return 0;
}

/* ---- the local launcher with slots ---- */

/* The entries of a CUDA_VISIBLE_DEVICES value ("0,2", "GPU-uuid,..."),
 * blanks trimmed, empty entries skipped, appended to out. */
static int split_gpu_list(const char *list, launch_words *out)
{
    const char *p = list;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *q = p;
        while (n > 0 && (*q == ' ' || *q == '\t')) {
            q++;
            n--;
        }
        while (n > 0 && (q[n - 1] == ' ' || q[n - 1] == '\t'))
            n--;
        if (n > 0) {
            if (launch_words_push(out, q, n) < 0)
                return CUCO_ENOMEM;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    return 0;
}

int cuco_launch_visible_gpus(void)
{
    int n = cuco_launch_detect_gpus();
    const char *visible = getenv("CUDA_VISIBLE_DEVICES");
    if (n > 0 && visible) {
        launch_words names = {0};
        if (split_gpu_list(visible, &names) == 0 && names.n < (size_t)n)
            n = (int)names.n;
        launch_words_free(&names);
    }
    return n;
}

static int take_slot(local_state *s, int exclusive)
{
    pthread_mutex_lock(&s->mu);
    int slot = 0;
    if (exclusive) {
        s->exclusive_waiting++;
        while (s->active > 0 || s->exclusive_running)
            pthread_cond_wait(&s->cv, &s->mu);
        s->exclusive_waiting--;
        s->exclusive_running = 1;
    } else {
        for (;;) {
            slot = -1;
            if (!s->exclusive_running && !s->exclusive_waiting)
                for (int i = 0; i < s->n_slots && slot < 0; i++)
                    if (!s->slots[i].busy)
                        slot = i;
            if (slot >= 0)
                break;
            pthread_cond_wait(&s->cv, &s->mu);
        }
        s->slots[slot].busy = 1;
        s->active++;
    }
    pthread_mutex_unlock(&s->mu);
    return slot;
}

static void give_slot(local_state *s, int slot, int exclusive)
{
    pthread_mutex_lock(&s->mu);
    if (exclusive) {
        s->exclusive_running = 0;
    } else {
        s->slots[slot].busy = 0;
        s->active--;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static int local_run(const cuco_launcher *l, const cuco_launch_job *job, cuco_launch_result *r,
                     cuco_err *e)
{
    local_state *s = l->impl;
    int exclusive = job->exclusive && !s->shared_bench;
    int slot = take_slot(s, exclusive);
    const local_slot *ls = &s->slots[slot];
    char *cvd = job->gpu && ls->gpus ? cuco_sprintf("CUDA_VISIBLE_DEVICES=%s", ls->gpus) : NULL;
    char *tmp = cuco_sprintf("TMPDIR=%s", ls->tmp_dir);
    char *ompi_tmp = cuco_sprintf("OMPI_MCA_orte_tmpdir_base=%s", ls->tmp_dir);
    const char *slot_env[] = {tmp, ompi_tmp, cvd, NULL};
    if (exclusive)
        launch_progress(job, "%s: exclusive use of the host (slot %d)",
                        job->name ? job->name : "run", slot);
    int rc = cuco_launch_local_once(job, slot_env, r, e);
    free(cvd);
    free(tmp);
    free(ompi_tmp);
    give_slot(s, slot, exclusive);
    return rc;
}

static void local_destroy(cuco_launcher *l)
{
    local_state *s = l->impl;
    if (!s)
        return;
    for (int i = 0; i < s->n_slots; i++) {
        free(s->slots[i].gpus);
        free(s->slots[i].tmp_dir);
    }
    free(s->slots);
    if (s->tmp_parent)
        cuco_fs_remove_tree(s->tmp_parent, NULL);
    free(s->tmp_parent);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int cuco_launcher_local_new(const cuco_local_opts *o, cuco_launcher **out, cuco_err *e)
{
    *out = NULL;
    cuco_local_opts d = {0};
    if (!o)
        o = &d;
    if (o->slots < 0 || o->ranks < 0)
        return cuco_err_set(e, CUCO_EINVAL, "launcher: slots and ranks must be >= 0");
    int ranks = o->ranks > 0 ? o->ranks : 1;
    /* The GPUs this process may use: when CUDA_VISIBLE_DEVICES already
     * restricts them, slots share out that list, never GPUs outside it. */
    const char *visible = o->visible_gpus ? o->visible_gpus : getenv("CUDA_VISIBLE_DEVICES");
    launch_words names = {0};
    if (o->gpu && visible && split_gpu_list(visible, &names) < 0) {
        launch_words_free(&names);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    int gpus = 0;
    if (o->gpu && visible)
        gpus = o->gpus >= 0 && (size_t)o->gpus < names.n ? o->gpus : (int)names.n;
    else if (o->gpu)
        gpus = o->gpus < 0 ? cuco_launch_detect_gpus() : o->gpus;
    int cores = o->cores > 0 ? o->cores : cuco_launch_detect_cores();
    int slots = o->slots > 0 ? o->slots : cuco_launch_auto_slots(o->gpu, ranks, gpus, cores);
    /* GPU runs cannot share GPUs: no more slots than disjoint GPU sets, each
     * backing verify_share slots for runs that are not exclusive. */
    int sets = slots;
    if (o->gpu && gpus > 0 && slots > gpus / ranks) {
        int fit = gpus / ranks > 0 ? gpus / ranks : 1;
        cuco_warn("launcher: %d slots asked but %d GPUs / %d ranks leave room for %d", slots, gpus,
                  ranks, fit);
        sets = slots = fit;
    }
    if (o->gpu && gpus > 0 && o->verify_share > 1 && !o->shared_bench)
        slots = sets * o->verify_share;
    cuco_launcher *l = calloc(1, sizeof *l);
    local_state *s = calloc(1, sizeof *s);
    if (!l || !s || !(s->slots = calloc((size_t)slots, sizeof *s->slots))) {
        free(l);
        if (s)
            free(s->slots);
        free(s);
        launch_words_free(&names);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->n_slots = slots;
    s->shared_bench = o->shared_bench;
    l->name = "local";
    l->slots = slots;
    l->run = local_run;
    l->destroy = local_destroy;
    l->impl = s;
    const char *root = o->tmp_root;
    if (!root || !*root)
        root = getenv("TMPDIR");
    if (!root || !*root)
        root = "/tmp";
    char *tmpl = cuco_sprintf("%s/cuco-slots-XXXXXX", root);
    if (!mkdtemp(tmpl)) {
        int rc = cuco_err_errno(e, "launcher: cannot create %s", tmpl);
        free(tmpl);
        cuco_launcher_free(l);
        launch_words_free(&names);
        return rc;
    }
    s->tmp_parent = tmpl;
    for (int i = 0; i < slots; i++) {
        local_slot *ls = &s->slots[i];
        ls->tmp_dir = cuco_sprintf("%s/slot%d", tmpl, i);
        int rc = cuco_fs_mkdirs(ls->tmp_dir, e);
        if (rc) {
            cuco_launcher_free(l);
            launch_words_free(&names);
            return rc;
        }
        if (o->gpu && gpus > 0) {
            /* Slot i gets GPUs i*R .. i*R+R-1 (of the visible list when there
             * is one); with fewer GPUs than ranks, all of them. */
            cuco_buf b = CUCO_BUF_INIT;
            int set = i % sets;
            int first = gpus >= ranks ? set * ranks : 0, count = gpus >= ranks ? ranks : gpus;
            for (int g = 0; g < count; g++) {
                if (visible)
                    cuco_buf_printf(&b, "%s%s", g ? "," : "", names.v[first + g]);
                else
                    cuco_buf_printf(&b, "%s%d", g ? "," : "", first + g);
            }
            ls->gpus = cuco_buf_detach(&b);
        }
    }
    launch_words_free(&names);
    *out = l;
    return 0;
}

/* For tests and status lines: the CUDA_VISIBLE_DEVICES value of a slot, or
 * NULL (CPU runs, or no such slot). The string stays the launcher's. */
const char *cuco_launcher_slot_gpus(const cuco_launcher *l, int slot)
{
    if (!l || strcmp(l->name, "local"))
        return NULL;
    const local_state *s = l->impl;
    return slot >= 0 && slot < s->n_slots ? s->slots[slot].gpus : NULL;
}
