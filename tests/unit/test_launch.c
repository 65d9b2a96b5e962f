/* test_launch.c: the launchers. Local: slot sizing and GPU sets, the slot's
 * environment, at most `slots` runs at once, and an exclusive run that never
 * overlaps another. Slurm: driven by fake sbatch/squeue/sacct/scancel/sinfo
 * scripts put first in PATH (the real cluster is tested by
 * tests/cli/test_slurm.sh): the sbatch flags, a NODE_FAIL retried, retries
 * running out, and a timeout that ends in scancel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/launch.h"

static char *tmp_dir;

static void put_file(const char *rel, const char *text, int mode)
{
    char *path = cuco_path_join(tmp_dir, rel);
    cuco_err e = CUCO_ERR_INIT;
    char *dir = cuco_path_dirname(path);
    assert_int_equal(cuco_fs_mkdirs(dir, &e), 0);
    assert_int_equal(cuco_fs_write(path, text, strlen(text), &e), 0);
    chmod(path, (mode_t)mode);
    free(dir);
    free(path);
}

static char *read_tmp(const char *rel)
{
    char *path = cuco_path_join(tmp_dir, rel), *text = NULL;
    if (cuco_fs_read(path, &text, NULL, NULL) != 0)
        text = cuco_strdup("");
    free(path);
    return text;
}

static void test_auto_slots(void **state)
{
    (void)state;
    assert_int_equal(cuco_launch_auto_slots(1, 1, 8, 2), 8);
    assert_int_equal(cuco_launch_auto_slots(1, 2, 8, 2), 4);
    assert_int_equal(cuco_launch_auto_slots(1, 2, 2, 64), 1);
    assert_int_equal(cuco_launch_auto_slots(1, 4, 2, 64), 1); /* too few GPUs: still one */
    assert_int_equal(cuco_launch_auto_slots(0, 2, 8, 16), 8);
    assert_int_equal(cuco_launch_auto_slots(0, 2, 0, 2), 1);
}

static void test_local_gpu_sets(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_launcher *l = NULL;
    cuco_local_opts o = {.gpu = 1, .ranks = 2, .gpus = 4, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 2);
    assert_string_equal(cuco_launcher_name(l), "local");
    assert_string_equal(cuco_launcher_slot_gpus(l, 0), "0,1");
    assert_string_equal(cuco_launcher_slot_gpus(l, 1), "2,3");
    assert_null(cuco_launcher_slot_gpus(l, 2));
    cuco_launcher_free(l);

    /* Asking for more slots than disjoint GPU sets gives as many as fit. */
    cuco_local_opts o2 = {.gpu = 1, .ranks = 1, .gpus = 2, .slots = 5, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o2, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 2);
    assert_string_equal(cuco_launcher_slot_gpus(l, 1), "1");
    cuco_launcher_free(l);

    /* verify_share: each GPU set backs that many slots, in turn */
    cuco_local_opts o4 = {.gpu = 1, .ranks = 1, .gpus = 2, .verify_share = 3, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o4, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 6);
    for (int i = 0; i < 6; i++)
        assert_string_equal(cuco_launcher_slot_gpus(l, i), i % 2 ? "1" : "0");
    cuco_launcher_free(l);
    /* ... but not with shared benchmarks, which would then share a GPU */
    cuco_local_opts o5 = {
        .gpu = 1, .ranks = 1, .gpus = 2, .verify_share = 3, .shared_bench = 1, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o5, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 2);
    cuco_launcher_free(l);

    /* CPU runs: no GPU sets, slots as asked. */
    cuco_local_opts o3 = {.gpu = 0, .ranks = 1, .slots = 3, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o3, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 3);
    assert_null(cuco_launcher_slot_gpus(l, 0));
    cuco_launcher_free(l);
    assert_string_equal(cuco_launcher_name(NULL), "local");
}

/* An existing CUDA_VISIBLE_DEVICES (a Slurm allocation, a user's choice) is
 * shared out among the slots: no slot gets a GPU outside it. */
static void test_local_visible_gpus(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_launcher *l = NULL;
    cuco_local_opts o = {
        .gpu = 1, .ranks = 1, .gpus = -1, .visible_gpus = "4, 6,GPU-abc", .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 3);
    assert_string_equal(cuco_launcher_slot_gpus(l, 0), "4");
    assert_string_equal(cuco_launcher_slot_gpus(l, 1), "6");
    assert_string_equal(cuco_launcher_slot_gpus(l, 2), "GPU-abc");
    cuco_launcher_free(l);

    /* 2 ranks a run: one slot holding both listed GPUs */
    cuco_local_opts o2 = {
        .gpu = 1, .ranks = 2, .gpus = -1, .visible_gpus = "2,3", .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o2, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 1);
    assert_string_equal(cuco_launcher_slot_gpus(l, 0), "2,3");
    cuco_launcher_free(l);

    /* --gpus N takes the first N of the list */
    cuco_local_opts o3 = {
        .gpu = 1, .ranks = 1, .gpus = 1, .slots = 2, .visible_gpus = "5,7", .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o3, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 1);
    assert_string_equal(cuco_launcher_slot_gpus(l, 0), "5");
    cuco_launcher_free(l);

    /* from the environment when not given */
    setenv("CUDA_VISIBLE_DEVICES", "1,3", 1);
    cuco_local_opts o4 = {.gpu = 1, .ranks = 1, .gpus = -1, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o4, &l, &e), 0);
    unsetenv("CUDA_VISIBLE_DEVICES");
    assert_int_equal(cuco_launcher_slots(l), 2);
    assert_string_equal(cuco_launcher_slot_gpus(l, 1), "3");
    cuco_launcher_free(l);
}

static void test_local_slot_env(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_launcher *l = NULL;
    cuco_local_opts o = {.gpu = 1, .ranks = 1, .gpus = 1, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o, &l, &e), 0);
    const char *argv[] = {"sh", "-c", "echo \"gpus=$CUDA_VISIBLE_DEVICES tmp=$TMPDIR x=$X\"", NULL};
    const char *env[] = {"X=42", "CUDA_VISIBLE_DEVICES=7", NULL};
    cuco_launch_job job = {.argv = argv, .ranks = 1, .env_set = env, .timeout_s = 10, .gpu = 1};
    cuco_launch_result r;
    assert_int_equal(cuco_launcher_run(l, &job, &r, &e), 0);
    assert_true(r.proc.exited);
    assert_int_equal(r.proc.exit_code, 0);
    assert_int_equal(r.infra_failure, 0);
    assert_int_equal(r.attempts, 1);
    /* The slot's GPU wins over the caller's; the caller's other settings stay. */
    assert_non_null(strstr(r.proc.out, "gpus=0 "));
    assert_non_null(strstr(r.proc.out, "/slot0 x=42"));
    assert_non_null(strstr(r.proc.out, tmp_dir));
    cuco_launch_result_free(&r);
    cuco_launcher_free(l);

    /* Without a launcher: the plain run, no slot settings. */
    assert_int_equal(cuco_launcher_run(NULL, &job, &r, &e), 0);
    assert_non_null(strstr(r.proc.out, "gpus=7 "));
    cuco_launch_result_free(&r);

    /* A missing program cannot be started: negative, e set. */
    const char *bad[] = {"/nonexistent/cuco-no-such-program", NULL};
    cuco_launch_job job2 = {.argv = bad, .ranks = 1, .timeout_s = 5};
    assert_true(cuco_launcher_run(NULL, &job2, &r, &e) < 0);
    assert_int_equal(e.code, CUCO_ENOTFOUND);
    cuco_err_clear(&e);
}

/* ---- concurrency of slots and exclusive runs ---- */

typedef struct run_arg {
    const cuco_launcher *l;
    int exclusive;
    double start, end; /* from the program's own clock */
    int rc;
} run_arg;

static void *run_thread(void *p)
{
    run_arg *a = p;
    const char *argv[] = {"sh", "-c", "date +%s.%N; sleep 0.4; date +%s.%N", NULL};
    cuco_launch_job job = {.argv = argv, .ranks = 1, .timeout_s = 20, .exclusive = a->exclusive};
    cuco_launch_result r;
    cuco_err e = CUCO_ERR_INIT;
    a->rc = cuco_launcher_run(a->l, &job, &r, &e);
    if (a->rc == 0) {
        char *nl = strchr(r.proc.out, '\n');
        a->start = atof(r.proc.out);
        a->end = nl ? atof(nl + 1) : 0;
        cuco_launch_result_free(&r);
    }
    cuco_err_clear(&e);
    return NULL;
}

static int overlap(const run_arg *a, const run_arg *b)
{
    return a->start < b->end && b->start < a->end;
}

static void run_many(const cuco_launcher *l, run_arg *args, int n)
{
    pthread_t th[16];
    for (int i = 0; i < n; i++) {
        args[i].l = l;
        assert_int_equal(pthread_create(&th[i], NULL, run_thread, &args[i]), 0);
        usleep(20000);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++)
        assert_int_equal(args[i].rc, 0);
}

static void test_local_slots_concurrency(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_launcher *l = NULL;
    cuco_local_opts o = {.gpu = 0, .ranks = 1, .slots = 2, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o, &l, &e), 0);
    run_arg args[4] = {{0}};
    run_many(l, args, 4);
    int most = 0, any_pair = 0;
    for (int i = 0; i < 4; i++) {
        int at_once = 1;
        for (int j = 0; j < 4; j++)
            if (j != i && args[j].start <= args[i].start && args[i].start < args[j].end)
                at_once++;
        if (at_once > most)
            most = at_once;
        for (int j = i + 1; j < 4; j++)
            any_pair |= overlap(&args[i], &args[j]);
    }
    assert_true(most <= 2); /* never more than the slots */
    assert_true(any_pair);  /* but the two slots were used at once */

    /* An exclusive run overlaps no other; the ordinary ones still pair up. */
    run_arg mixed[5] = {{0}};
    mixed[2].exclusive = 1;
    run_many(l, mixed, 5);
    for (int j = 0; j < 5; j++)
        if (j != 2)
            assert_false(overlap(&mixed[2], &mixed[j]));
    cuco_launcher_free(l);

    /* One GPU shared by 3 verification runs: they run at once, and a
     * benchmark (exclusive) still overlaps none of them. */
    cuco_local_opts o3 = {.gpu = 1, .ranks = 1, .gpus = 1, .verify_share = 3, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o3, &l, &e), 0);
    run_arg ver[5] = {{0}};
    ver[3].exclusive = 1;
    run_many(l, ver, 5);
    assert_true(overlap(&ver[0], &ver[1]) && overlap(&ver[1], &ver[2]));
    for (int j = 0; j < 5; j++)
        if (j != 3)
            assert_false(overlap(&ver[3], &ver[j]));
    cuco_launcher_free(l);

    /* shared_bench: the exclusive flag is ignored. */
    cuco_local_opts o2 = {.gpu = 0, .ranks = 1, .slots = 2, .shared_bench = 1, .tmp_root = tmp_dir};
    assert_int_equal(cuco_launcher_local_new(&o2, &l, &e), 0);
    run_arg shared[2] = {{0}};
    shared[0].exclusive = shared[1].exclusive = 1;
    run_many(l, shared, 2);
    assert_true(overlap(&shared[0], &shared[1]));
    cuco_launcher_free(l);
}

/* ---- Slurm with fake client commands ---- */

/* The fakes keep their state in FAKE_DIR: sbatch.log (arguments), a job
 * counter, and per job "job-N.state". FAKE_MODE picks the story:
 *   nodefail-once  job 1 ends NODE_FAIL without running; later jobs run
 *   nodefail       every job ends NODE_FAIL
 *   hang           jobs stay RUNNING and never run their script */
static const char *fake_sbatch =
    "#!/bin/sh\n"
    "d=$FAKE_DIR; echo \"$*\" >> $d/sbatch.log\n"
    "n=$(( $(cat $d/count 2>/dev/null || echo 0) + 1 )); echo $n > $d/count\n"
    "for a in \"$@\"; do script=$a; case $a in --output=*) out=${a#--output=};;"
    " --error=*) err=${a#--error=};; esac; done\n"
    "case $FAKE_MODE in\n"
    " nodefail) echo NODE_FAIL > $d/job-$n.state;;\n"
    " nodefail-once) if [ $n = 1 ]; then echo NODE_FAIL > $d/job-$n.state;"
    " else sh $script > $out 2> $err; echo COMPLETED > $d/job-$n.state; fi;;\n"
    " hang) echo RUNNING > $d/job-$n.state;;\n"
    "esac\n"
    "echo \"$n;fakecluster\"\n";
static const char *fake_squeue =
    "#!/bin/sh\n"
    "while [ $# -gt 0 ]; do [ \"$1\" = -j ] && id=$2; shift; done\n"
    "echo squeue $id >> $FAKE_DIR/poll.log\n"
    "if [ -f $FAKE_DIR/job-$id.state ]; then echo \"$(cat $FAKE_DIR/job-$id.state)|node1\";"
    " else echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1; fi\n";
static const char *fake_scancel =
    "#!/bin/sh\necho \"$1\" >> $FAKE_DIR/scancel.log; echo CANCELLED > $FAKE_DIR/job-$1.state\n";
static const char *fake_sinfo = "#!/bin/sh\necho 'node1 mixed'\n";
static const char *fake_sacct = "#!/bin/sh\nexit 1\n";

static cuco_launcher *fake_slurm(const char *mode, int retries, const char *story, double poll_max)
{
    char *bin = cuco_path_join(tmp_dir, "fakebin");
    char *d = cuco_path_join(tmp_dir, story);
    cuco_fs_remove_tree(d, NULL);
    cuco_fs_mkdirs(d, NULL);
    put_file("fakebin/sbatch", fake_sbatch, 0755);
    put_file("fakebin/squeue", fake_squeue, 0755);
    put_file("fakebin/scancel", fake_scancel, 0755);
    put_file("fakebin/sinfo", fake_sinfo, 0755);
    put_file("fakebin/sacct", fake_sacct, 0755);
    const char *path = getenv("PATH");
    char *newpath = cuco_sprintf("%s:%s", bin, path ? path : "/usr/bin:/bin");
    static char *saved_path;
    if (!saved_path)
        saved_path = cuco_strdup(path ? path : "/usr/bin:/bin");
    else {
        free(newpath);
        newpath = cuco_sprintf("%s:%s", bin, saved_path);
    }
    setenv("PATH", newpath, 1);
    setenv("FAKE_DIR", d, 1);
    setenv("FAKE_MODE", mode, 1);
    cuco_slurm_opts o = {.retries = retries, .poll_s = 0.05, .poll_max_s = poll_max};
    cuco_launcher *l = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_slurm_new(&o, &l, &e), 0);
    assert_string_equal(cuco_launcher_name(l), "slurm");
    free(newpath);
    free(bin);
    free(d);
    return l;
}

static void job_for(cuco_launch_job *job, const char *const *argv, const char *cwd)
{
    memset(job, 0, sizeof *job);
    job->argv = argv;
    job->ranks = 2;
    job->mpi = 0;
    job->cwd = cwd;
    job->timeout_s = 30;
    job->gpu = 1;
    job->name = "L2 verify";
}

static void test_slurm_nodefail_retried(void **state)
{
    (void)state;
    cuco_launcher *l = fake_slurm("nodefail-once", 2, "story1", 0.2);
    char *cwd = cuco_path_join(tmp_dir, "story1");
    const char *argv[] = {"sh", "-c", "echo \"it's $0\"; echo oops >&2; exit 3", "me", NULL};
    cuco_launch_job job;
    job_for(&job, argv, cwd);
    cuco_launch_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_run(l, &job, &r, &e), 0);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.infra_failures, 1);
    assert_int_equal(r.infra_failure, 0);
    assert_string_equal(r.job_id, "2");
    assert_true(r.proc.exited);
    assert_int_equal(r.proc.exit_code, 3); /* the program's own status */
    assert_string_equal(r.proc.out, "it's me\n");
    assert_string_equal(r.proc.err, "oops\n");
    char *log = read_tmp("story1/sbatch.log");
    assert_non_null(strstr(log, "--ntasks=2"));
    assert_non_null(strstr(log, "--gres=gpu:2"));
    assert_non_null(strstr(log, "--no-requeue"));
    assert_non_null(strstr(log, "--time=1:31")); /* 30 s + 60 s grace, rounded up */
    assert_non_null(strstr(log, "--job-name=cuco-L2_verify"));
    free(log);
    cuco_launch_result_free(&r);
    cuco_launcher_free(l);
    free(cwd);
}

/* A confined job's batch script starts the program through the cuco
 * binary's hidden `confine-exec`, with the same writable folders. */
static void test_slurm_confined_script(void **state)
{
    (void)state;
    cuco_launcher *l = fake_slurm("nodefail", 0, "story6", 0.2);
    char *cwd = cuco_path_join(tmp_dir, "story6");
    const char *argv[] = {"prog", "--n", "4", NULL};
    const char *writable[] = {cwd, NULL};
    cuco_confine c = {.enabled = 1, .writable = writable};
    cuco_launch_job job;
    job_for(&job, argv, cwd);
    job.mpi = 1;
    job.confine = &c;
    cuco_launch_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_run(l, &job, &r, &e), 0);
    char *script = NULL;
    DIR *d = opendir(cwd);
    struct dirent *de;
    while (d && !script && (de = readdir(d)) != NULL)
        if (cuco_str_ends_with(de->d_name, ".sh")) {
            char *rel = cuco_sprintf("story6/%s", de->d_name);
            script = read_tmp(rel);
            free(rel);
        }
    if (d)
        closedir(d);
    assert_non_null(script);
    char *want = cuco_sprintf(" 'confine-exec' '--write' '%s' '--' 'mpirun' '-np' '2' ", cwd);
    assert_non_null(strstr(script, want));
    assert_non_null(strstr(script, " 'prog' '--n' '4'\n"));
    free(want);
    free(script);
    cuco_launch_result_free(&r);
    cuco_launcher_free(l);
    free(cwd);
}

/* Site settings from the environment reach sbatch: a typed GPU gres, the
 * time grace, a partition and extra flags after cuco's own; a malformed
 * number is refused before anything is submitted. */
static void test_slurm_site_settings(void **state)
{
    (void)state;
    cuco_launcher *fake = fake_slurm("nodefail-once", 2, "story5", 0.2);
    cuco_launcher_free(fake); /* only its PATH and FAKE_* settings are kept */
    setenv("CUCO_SLURM_GRES", "gpu:h100", 1);
    setenv("CUCO_SLURM_TIME_GRACE_S", "90", 1);
    setenv("CUCO_SLURM_PARTITION", "debug", 1);
    setenv("CUCO_SLURM_SBATCH_ARGS", " --account=proj  --qos=short ", 1);
    setenv("CUCO_SLURM_POLL_MAX_S", "0.2", 1);
    cuco_launcher *l = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_from_kind("slurm", 1, 2, 0, -1, 0, 1, &l, &e), 0);
    char *cwd = cuco_path_join(tmp_dir, "story5");
    const char *argv[] = {"true", NULL};
    cuco_launch_job job;
    job_for(&job, argv, cwd);
    cuco_launch_result r;
    assert_int_equal(cuco_launcher_run(l, &job, &r, &e), 0);
    assert_int_equal(r.attempts, 2); /* the retry keeps the settings too */
    char *log = read_tmp("story5/sbatch.log");
    const char *second = log + strcspn(log, "\n");
    assert_int_equal(*second, '\n');
    assert_non_null(strstr(second, "--gres=gpu:h100:2"));
    assert_non_null(strstr(second, "--time=2:01")); /* 30 s + 90 s, rounded up */
    assert_non_null(strstr(second, "--partition=debug"));
    assert_non_null(strstr(second, "--no-requeue --gres=gpu:h100:2 --partition=debug"
                                   " --account=proj --qos=short "));
    free(log);
    cuco_launch_result_free(&r);
    cuco_launcher_free(l);

    setenv("CUCO_SLURM_TIME_GRACE_S", "1m", 1);
    assert_int_equal(cuco_launcher_from_kind("slurm", 1, 2, 0, -1, 0, 1, &l, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "CUCO_SLURM_TIME_GRACE_S=1m"));
    cuco_err_clear(&e);
    unsetenv("CUCO_SLURM_GRES");
    unsetenv("CUCO_SLURM_TIME_GRACE_S");
    unsetenv("CUCO_SLURM_PARTITION");
    unsetenv("CUCO_SLURM_SBATCH_ARGS");
    unsetenv("CUCO_SLURM_POLL_MAX_S");
    free(cwd);
}

static void test_slurm_retries_run_out(void **state)
{
    (void)state;
    cuco_launcher *l = fake_slurm("nodefail", 1, "story2", 0.2);
    char *cwd = cuco_path_join(tmp_dir, "story2");
    const char *argv[] = {"true", NULL};
    cuco_launch_job job;
    job_for(&job, argv, cwd);
    cuco_launch_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_run(l, &job, &r, &e), 0);
    assert_int_equal(r.attempts, 2);
    assert_int_equal(r.infra_failures, 2);
    assert_int_equal(r.infra_failure, 1);
    assert_non_null(strstr(r.infra_reason, "NODE_FAIL"));
    assert_false(r.proc.exited); /* the program's outcome is unknown */
    cuco_launch_result_free(&r);
    cuco_launcher_free(l);
    free(cwd);
}

static void test_slurm_timeout_cancels(void **state)
{
    (void)state;
    cuco_launcher *l = fake_slurm("hang", 2, "story3", 0.4);
    char *cwd = cuco_path_join(tmp_dir, "story3");
    const char *argv[] = {"true", NULL};
    cuco_launch_job job;
    job_for(&job, argv, cwd);
    job.timeout_s = 1.5;
    cuco_launch_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_run(l, &job, &r, &e), 0);
    assert_int_equal(r.attempts, 1); /* a timeout is the program's, not retried */
    assert_int_equal(r.infra_failure, 0);
    assert_true(r.proc.timed_out);
    char *cancelled = read_tmp("story3/scancel.log");
    assert_string_equal(cancelled, "1\n");
    free(cancelled);
    /* Polls back off (0.05 s growing to 0.4 s): about 9 squeue calls in
     * 1.5 s, where a fixed 0.1 s tick would make 15. */
    char *polls = read_tmp("story3/poll.log");
    int n = 0;
    for (const char *p = polls; (p = strchr(p, '\n')); p++)
        n++;
    assert_true(n >= 3 && n <= 11);
    free(polls);
    cuco_launch_result_free(&r);
    cuco_launcher_free(l);
    free(cwd);
}

static void test_shell_quote(void **state)
{
    (void)state;
    char *q = cuco_launch_shell_quote("it's a $x");
    assert_string_equal(q, "'it'\\''s a $x'");
    free(q);
    q = cuco_launch_shell_quote("");
    assert_string_equal(q, "''");
    free(q);
}

static void test_from_kind(void **state)
{
    (void)state;
    cuco_launcher *l = NULL;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_launcher_from_kind("pbs", 0, 1, 0, 0, 0, 1, &l, &e), CUCO_EINVAL);
    assert_non_null(strstr(cuco_err_msg(&e), "pbs"));
    cuco_err_clear(&e);
    assert_int_equal(cuco_launcher_from_kind(NULL, 0, 2, 3, 0, 0, 1, &l, &e), 0);
    assert_int_equal(cuco_launcher_slots(l), 3);
    cuco_launcher_free(l);
}

static int setup(void **state)
{
    (void)state;
    /* the GPU-set tests count GPUs themselves: none may come from the caller */
    unsetenv("CUDA_VISIBLE_DEVICES");
    const char *base = getenv("CUCO_TEST_TMP");
    char *root = cuco_strdup(base && *base ? base : "/tmp");
    cuco_fs_mkdirs(root, NULL);
    tmp_dir = cuco_sprintf("%s/launch-XXXXXX", root);
    free(root);
    return mkdtemp(tmp_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cuco_fs_remove_tree(tmp_dir, NULL);
    free(tmp_dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_slots),
        cmocka_unit_test(test_local_gpu_sets),
        cmocka_unit_test(test_local_visible_gpus),
        cmocka_unit_test(test_local_slot_env),
        cmocka_unit_test(test_local_slots_concurrency),
        cmocka_unit_test(test_shell_quote),
        cmocka_unit_test(test_from_kind),
        cmocka_unit_test(test_slurm_nodefail_retried),
        cmocka_unit_test(test_slurm_retries_run_out),
        cmocka_unit_test(test_slurm_timeout_cancels),
        cmocka_unit_test(test_slurm_site_settings),
        cmocka_unit_test(test_slurm_confined_script),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
