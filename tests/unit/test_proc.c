/* test_proc.c: the subprocess module: exit codes and signals, capture caps,
 * timeouts that kill whole process groups, environment, stdin, cwd, missing
 * programs, and concurrent use from several threads. Spawns the helper
 * programs of tests/helpers (found through CUCO_TEST_HELPERS). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/proc.h"

static const char *helpers_dir;
static char *tmp_dir;

/* Path of a helper program; caller frees. */
static char *helper(const char *name)
{
    return cuco_path_join(helpers_dir, name);
}

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads the pid a helper wrote; 0 if the file is missing. */
static pid_t read_pid_file(const char *path)
{
    char *text = NULL;
    size_t len = 0;
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_fs_read(path, &text, &len, &e) != 0) {
        cuco_err_clear(&e);
        return 0;
    }
    pid_t pid = (pid_t)atoi(text);
    free(text);
    return pid;
}

/* 1 when pid no longer runs: gone, or a zombie nobody reaped yet (in a
 * container the init process may never reap reparented children). Waits up to
 * two seconds for the kernel to finish the kill. */
static int process_gone(pid_t pid)
{
    for (int i = 0; i < 200; i++) {
        if (kill(pid, 0) != 0 && errno == ESRCH)
            return 1;
        char *stat_path = cuco_sprintf("/proc/%d/stat", (int)pid);
        char *text = NULL;
        size_t len = 0;
        cuco_err e = CUCO_ERR_INIT;
        int zombie = 0;
        if (cuco_fs_read(stat_path, &text, &len, &e) == 0) {
            const char *close_paren = strrchr(text, ')');
            zombie = close_paren && (close_paren[2] == 'Z' || close_paren[2] == 'X');
        }
        cuco_err_clear(&e);
        free(text);
        free(stat_path);
        if (zombie)
            return 1;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return 0;
}

static int setup(void **state)
{
    (void)state;
    helpers_dir = getenv("CUCO_TEST_HELPERS");
    if (!helpers_dir)
        return -1;
    const char *base = getenv("CUCO_TEST_TMP") ? getenv("CUCO_TEST_TMP") : "/tmp";
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_fs_mkdirs(base, &e) != 0)
        return -1;
    char *templ = cuco_sprintf("%s/proc-XXXXXX", base);
    if (!mkdtemp(templ)) {
        free(templ);
        return -1;
    }
    tmp_dir = templ;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    if (tmp_dir)
        cuco_fs_remove_tree(tmp_dir, &e);
    cuco_err_clear(&e);
    free(tmp_dir);
    return 0;
}

static void test_exit_codes_and_streams(void **state)
{
    (void)state;
    char *prog = helper("proc_exit");
    const char *codes[] = {"0", "3", "255"};
    for (size_t i = 0; i < 3; i++) {
        const char *argv[] = {prog, codes[i], NULL};
        cuco_proc_opts o = {.argv = argv, .timeout_s = 10};
        cuco_proc_result r;
        cuco_err e = CUCO_ERR_INIT;
        assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
        assert_true(r.exited);
        assert_false(r.signaled);
        assert_false(r.timed_out);
        assert_int_equal(r.exit_code, atoi(codes[i]));
        char *want_out = cuco_sprintf("out %s\n", codes[i]);
        char *want_err = cuco_sprintf("err %s\n", codes[i]);
        assert_string_equal(r.out, want_out);
        assert_string_equal(r.err, want_err);
        assert_int_equal(r.out_len, strlen(want_out));
        assert_int_equal(r.out_total, strlen(want_out));
        assert_int_equal(r.err_total, strlen(want_err));
        char *d = cuco_proc_describe(&r);
        char *want_d = cuco_sprintf("exit %s", codes[i]);
        assert_string_equal(d, want_d);
        free(d);
        free(want_d);
        free(want_out);
        free(want_err);
        cuco_proc_result_free(&r);
    }
    /* merged: both lines in out, err empty */
    const char *argv[] = {prog, "4", NULL};
    cuco_proc_opts o = {.argv = argv, .merge_stderr = 1};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_non_null(strstr(r.out, "out 4\n"));
    assert_non_null(strstr(r.out, "err 4\n"));
    assert_string_equal(r.err, "");
    assert_int_equal(r.err_len, 0);
    cuco_proc_result_free(&r);
    free(prog);
}

static void test_segv_reported_as_signal(void **state)
{
    (void)state;
    char *prog = helper("proc_segv");
    const char *argv[] = {prog, NULL};
    /* AddressSanitizer would turn the fault into exit 1. */
    const char *env[] = {"ASAN_OPTIONS=handle_segv=0", NULL};
    cuco_proc_opts o = {.argv = argv, .env_set = env, .timeout_s = 10};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_false(r.exited);
    assert_true(r.signaled);
    assert_int_equal(r.term_signal, SIGSEGV);
    assert_string_equal(r.out, "about to crash\n");
    char *d = cuco_proc_describe(&r);
    assert_string_equal(d, "killed by SIGSEGV (signal 11)");
    free(d);
    cuco_proc_result_free(&r);
    free(prog);
}

static void test_hang_killed_at_timeout(void **state)
{
    (void)state;
    char *prog = helper("proc_hang");
    const char *argv[] = {prog, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 1.0, .kill_grace_s = 0.5};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    double t0 = mono_now();
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    double took = mono_now() - t0;
    assert_true(took >= 1.0);
    assert_true(took < 1.0 + 0.5 + 0.5);
    assert_true(r.timed_out);
    assert_true(r.signaled);
    assert_int_equal(r.term_signal, SIGTERM);
    assert_string_equal(r.out, "hanging\n");
    char *d = cuco_proc_describe(&r);
    assert_string_equal(d, "timed out after 1.0 s (process group killed)");
    free(d);
    cuco_proc_result_free(&r);
    free(prog);
}

static void test_sigterm_ignored_then_sigkill(void **state)
{
    (void)state;
    char *prog = helper("proc_hang");
    const char *argv[] = {prog, "--ignore-term", NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 0.5, .kill_grace_s = 0.5};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    double t0 = mono_now();
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    double took = mono_now() - t0;
    assert_true(took >= 1.0);
    assert_true(took < 0.5 + 0.5 + 0.5);
    assert_true(r.timed_out);
    assert_true(r.signaled);
    assert_int_equal(r.term_signal, SIGKILL);
    cuco_proc_result_free(&r);
    free(prog);
}

/* A grandchild that keeps the pipes open must be killed at the timeout,
 * whether its parent (the direct child) already exited or still sleeps. */
static void run_fork_hang(const char *mode)
{
    char *prog = helper("proc_fork_hang");
    char *pid_file = cuco_sprintf("%s/grandchild-%s.pid", tmp_dir, mode);
    const char *argv[] = {prog, mode, pid_file, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 1.0, .kill_grace_s = 0.5};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    double t0 = mono_now();
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    double took = mono_now() - t0;
    assert_true(took >= 1.0);
    assert_true(took < 1.0 + 0.5 + 0.5);
    assert_true(r.timed_out);
    assert_non_null(strstr(r.out, "grandchild "));
    if (strcmp(mode, "exit") == 0) {
        assert_true(r.exited);
        assert_int_equal(r.exit_code, 0);
    } else {
        assert_true(r.signaled);
    }
    pid_t grandchild = read_pid_file(pid_file);
    assert_true(grandchild > 0);
    assert_true(process_gone(grandchild));
    cuco_proc_result_free(&r);
    free(pid_file);
    free(prog);
}

static void test_grandchild_killed_parent_exited(void **state)
{
    (void)state;
    run_fork_hang("exit");
}

static void test_grandchild_killed_parent_sleeps(void **state)
{
    (void)state;
    run_fork_hang("sleep");
}

/* A grandchild that let go of the pipes does not hold the call up, and
 * does not outlive it either. */
static void test_detached_leftover_killed(void **state)
{
    (void)state;
    char *prog = helper("proc_fork_hang");
    char *pid_file = cuco_sprintf("%s/grandchild-detached.pid", tmp_dir);
    const char *argv[] = {prog, "detached", pid_file, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 10};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    double t0 = mono_now();
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_true(mono_now() - t0 < 3.0);
    assert_false(r.timed_out);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0);
    pid_t grandchild = read_pid_file(pid_file);
    assert_true(grandchild > 0);
    assert_true(process_gone(grandchild));
    cuco_proc_result_free(&r);
    free(pid_file);
    free(prog);
}

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static const char PATTERN[] = "0123456789abcdefghijklmnopqrstuvwxyz\n";

/* Checks that s[0..n) equals the spew pattern starting at stream offset off. */
static void assert_pattern(const char *s, size_t n, unsigned long long off)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != PATTERN[(off + i) % 37])
            fail_msg("byte %zu (stream offset %llu) is %d", i, off + i, s[i]);
}

static void test_gigabyte_capped(void **state)
{
    (void)state;
    const unsigned long long total = 1ULL << 30;
    char *prog = helper("proc_spew");
    char *count = cuco_sprintf("%llu", total);
    const char *argv[] = {prog, count, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 30};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    long rss0 = max_rss_kb();
    double t0 = mono_now();
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    double took = mono_now() - t0;
    long rss1 = max_rss_kb();
    print_message("1 GiB through the pipe in %.2f s, max RSS grew by %ld KiB\n", took, rss1 - rss0);
    assert_true(took < 15.0);
    assert_false(r.timed_out);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 0);
    assert_true(r.out_total == total);
    assert_true(rss1 - rss0 < 64 * 1024);

    size_t half = ((size_t)1 << 20) / 2;
    const char *marker_line = strstr(r.out, "[... ");
    assert_non_null(marker_line);
    /* head: the first cap/2 bytes, then a newline (the pattern's last byte
     * there is not one), then the marker line, then the last cap/2 bytes */
    assert_pattern(r.out, half, 0);
    assert_ptr_equal(marker_line, r.out + half + 1);
    char *want_marker = cuco_sprintf("[... %llu bytes omitted ...]\n", total - 2 * half);
    assert_memory_equal(marker_line, want_marker, strlen(want_marker));
    const char *tail = marker_line + strlen(want_marker);
    assert_int_equal((size_t)(r.out + r.out_len - tail), half);
    assert_pattern(tail, half, total - half);
    assert_int_equal(r.out_len, half + 1 + strlen(want_marker) + half);
    assert_int_equal(strlen(r.out), r.out_len);
    free(want_marker);
    cuco_proc_result_free(&r);
    free(count);
    free(prog);
}

static void test_both_streams_no_deadlock(void **state)
{
    (void)state;
    char *prog = helper("proc_spew");
    const char *argv[] = {prog, "20000000", "both", NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 20, .capture_cap = 1000};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_false(r.timed_out);
    assert_true(r.exited);
    assert_int_equal(r.out_total, 20000000);
    assert_int_equal(r.err_total, 20000000);
    assert_pattern(r.out, 500, 0);
    assert_pattern(r.err, 500, 0);
    assert_pattern(r.err + r.err_len - 500, 500, 20000000 - 500);
    assert_non_null(strstr(r.err, "[... 19999000 bytes omitted ...]\n"));
    cuco_proc_result_free(&r);

    /* exactly at the cap: everything kept, no marker */
    const char *argv2[] = {prog, "1000", NULL};
    cuco_proc_opts o2 = {.argv = argv2, .capture_cap = 1000};
    assert_int_equal(cuco_proc_run(&o2, &r, &e), 0);
    assert_int_equal(r.out_len, 1000);
    assert_pattern(r.out, 1000, 0);
    cuco_proc_result_free(&r);
    /* one byte over: one byte omitted */
    const char *argv3[] = {prog, "1001", NULL};
    cuco_proc_opts o3 = {.argv = argv3, .capture_cap = 1000};
    assert_int_equal(cuco_proc_run(&o3, &r, &e), 0);
    assert_non_null(strstr(r.out, "[... 1 bytes omitted ...]\n"));
    assert_pattern(r.out + r.out_len - 500, 500, 501);
    cuco_proc_result_free(&r);
    free(prog);
}

static void test_env_set(void **state)
{
    (void)state;
    setenv("CUCO_PROC_TEST_KEPT", "parent", 1);
    setenv("CUCO_PROC_TEST_OVERRIDE", "parent", 1);
    unsetenv("CUCO_PROC_TEST_NEW");
    char *prog = helper("proc_echo_env");
    const char *argv[] = {prog, "CUCO_PROC_TEST_KEPT", "CUCO_PROC_TEST_OVERRIDE",
                          "CUCO_PROC_TEST_NEW", NULL};
    const char *env[] = {"CUCO_PROC_TEST_OVERRIDE=child", "CUCO_PROC_TEST_NEW=a=b c", NULL};
    cuco_proc_opts o = {.argv = argv, .env_set = env};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_string_equal(r.out, "CUCO_PROC_TEST_KEPT=parent\n"
                               "CUCO_PROC_TEST_OVERRIDE=child\n"
                               "CUCO_PROC_TEST_NEW=a=b c\n");
    cuco_proc_result_free(&r);
    /* for the child only */
    assert_string_equal(getenv("CUCO_PROC_TEST_OVERRIDE"), "parent");
    assert_null(getenv("CUCO_PROC_TEST_NEW"));

    const char *bad_env[] = {"NO_EQUALS_SIGN", NULL};
    cuco_proc_opts bad = {.argv = argv, .env_set = bad_env};
    assert_int_equal(cuco_proc_run(&bad, &r, &e), CUCO_EINVAL);
    assert_non_null(strstr(e.msg, "NO_EQUALS_SIGN"));
    cuco_err_clear(&e);
    free(prog);
}

static void test_stdin(void **state)
{
    (void)state;
    char *prog = helper("proc_stdin");
    const char *argv[] = {prog, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 10};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_string_equal(r.out, "stdin: devnull\n");
    cuco_proc_result_free(&r);

    char *in_path = cuco_path_join(tmp_dir, "input.txt");
    assert_int_equal(cuco_fs_write(in_path, "line one\nline two\n", 18, &e), 0);
    o.stdin_path = in_path;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_string_equal(r.out, "stdin: other\nline one\nline two\n");
    cuco_proc_result_free(&r);

    char *missing = cuco_path_join(tmp_dir, "no-such-input");
    o.stdin_path = missing;
    assert_int_equal(cuco_proc_run(&o, &r, &e), CUCO_ENOTFOUND);
    assert_non_null(strstr(e.msg, "no-such-input"));
    cuco_err_clear(&e);
    free(missing);
    free(in_path);
    free(prog);
}

/* With this process's stdin closed, the child's /dev/null lands on fd 0
 * here; the child must still get it as its stdin. */
static void test_caller_with_closed_stdin(void **state)
{
    (void)state;
    int saved = dup(0);
    assert_true(saved > 2);
    close(0);
    char *prog = helper("proc_stdin");
    const char *argv[] = {prog, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = 10};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_proc_run(&o, &r, &e);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    assert_int_equal(rc, 0);
    assert_string_equal(r.out, "stdin: devnull\n");
    cuco_proc_result_free(&r);
    free(prog);
}

static void test_missing_program(void **state)
{
    (void)state;
    const char *argv[] = {"cuco-no-such-program-xyz", "--flag", NULL};
    cuco_proc_opts o = {.argv = argv};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), CUCO_ENOTFOUND);
    assert_non_null(strstr(e.msg, "cuco-no-such-program-xyz"));
    assert_null(r.out);
    cuco_err_clear(&e);

    char *abs_missing = cuco_path_join(tmp_dir, "not-here");
    const char *argv2[] = {abs_missing, NULL};
    cuco_proc_opts o2 = {.argv = argv2};
    assert_int_equal(cuco_proc_run(&o2, &r, &e), CUCO_ENOTFOUND);
    assert_non_null(strstr(e.msg, "not-here"));
    cuco_err_clear(&e);
    free(abs_missing);

    const char *empty[] = {NULL};
    cuco_proc_opts o3 = {.argv = empty};
    assert_int_equal(cuco_proc_run(&o3, &r, &e), CUCO_EINVAL);
    cuco_err_clear(&e);
}

static void test_cwd(void **state)
{
    (void)state;
    const char *argv[] = {"pwd", "-P", NULL};
    cuco_proc_opts o = {.argv = argv, .cwd = tmp_dir};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    char *want = cuco_path_abs(tmp_dir);
    char *got = cuco_strdup(r.out);
    assert_string_equal(cuco_str_trim(got), want);
    free(got);
    free(want);
    cuco_proc_result_free(&r);

    char *missing = cuco_path_join(tmp_dir, "no-such-folder");
    o.cwd = missing;
    assert_int_equal(cuco_proc_run(&o, &r, &e), CUCO_ENOTFOUND);
    assert_non_null(strstr(e.msg, "no-such-folder"));
    cuco_err_clear(&e);
    free(missing);
}

static void test_cancel(void **state)
{
    (void)state;
    char *prog = helper("proc_hang");
    const char *argv[] = {prog, NULL};
    volatile int cancel = 1;
    cuco_proc_opts o = {.argv = argv, .timeout_s = 30, .cancel = &cancel, .kill_grace_s = 0.5};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    double t0 = mono_now();
    assert_int_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_true(mono_now() - t0 < 2.0);
    assert_true(r.cancelled);
    assert_false(r.timed_out);
    char *d = cuco_proc_describe(&r);
    assert_string_equal(d, "cancelled (process group killed)");
    free(d);
    cuco_proc_result_free(&r);
    free(prog);
}

/* If the caller dies (here: a forked copy of this test, killed with
 * SIGKILL while it waits), its child is stopped too. */
static void test_caller_death_stops_child(void **state)
{
    (void)state;
    char *prog = helper("proc_hang");
    char *pid_file = cuco_sprintf("%s/orphan.pid", tmp_dir);
    pid_t caller = fork();
    assert_true(caller >= 0);
    if (caller == 0) {
        const char *argv[] = {prog, pid_file, NULL};
        cuco_proc_opts o = {.argv = argv, .timeout_s = 60};
        cuco_proc_result r;
        cuco_err e = CUCO_ERR_INIT;
        cuco_proc_run(&o, &r, &e);
        _exit(0);
    }
    pid_t hang = 0;
    for (int i = 0; i < 500 && hang <= 0; i++) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
        hang = read_pid_file(pid_file);
    }
    assert_true(hang > 0);
    assert_int_equal(kill(hang, 0), 0);
    kill(caller, SIGKILL);
    int status;
    assert_int_equal(waitpid(caller, &status, 0), caller);
    assert_true(process_gone(hang));
    free(pid_file);
    free(prog);
}

struct thread_job {
    int code;
    int hang;
    int rc;
    cuco_proc_result res;
    double took;
};

static void *thread_main(void *arg)
{
    struct thread_job *job = arg;
    char *prog = helper(job->hang ? "proc_hang" : "proc_exit");
    char *code = cuco_sprintf("%d", job->code);
    const char *argv[] = {prog, job->hang ? NULL : code, NULL};
    cuco_proc_opts o = {.argv = argv, .timeout_s = job->hang ? 2.0 : 20.0, .kill_grace_s = 0.2};
    cuco_err e = CUCO_ERR_INIT;
    double t0 = mono_now();
    job->rc = cuco_proc_run(&o, &job->res, &e);
    job->took = mono_now() - t0;
    cuco_err_clear(&e);
    free(code);
    free(prog);
    return NULL;
}

/* Several threads at once; a hanging child in one thread must not hold up
 * the others (its pipes must not leak into their children). */
static void test_threads(void **state)
{
    (void)state;
    enum { N = 6 };
    struct thread_job jobs[N];
    pthread_t threads[N];
    memset(jobs, 0, sizeof jobs);
    jobs[0].hang = 1;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < N; i++) {
            jobs[i].code = i + 10 * round;
            assert_int_equal(pthread_create(&threads[i], NULL, thread_main, &jobs[i]), 0);
        }
        for (int i = 0; i < N; i++)
            assert_int_equal(pthread_join(threads[i], NULL), 0);
        for (int i = 0; i < N; i++) {
            assert_int_equal(jobs[i].rc, 0);
            if (jobs[i].hang) {
                assert_true(jobs[i].res.timed_out);
            } else {
                assert_true(jobs[i].res.exited);
                assert_int_equal(jobs[i].res.exit_code, jobs[i].code);
                char *want = cuco_sprintf("out %d\n", jobs[i].code);
                assert_string_equal(jobs[i].res.out, want);
                free(want);
                assert_true(jobs[i].took < 1.8);
            }
            cuco_proc_result_free(&jobs[i].res);
        }
    }
}

static void test_argv_string(void **state)
{
    (void)state;
    const char *argv[] = {"nvcc", "-o", "a b", "it's", "", "x=$HOME", "-DN=4", "/p/q.cu", NULL};
    char *s = cuco_proc_argv_string(argv);
    assert_string_equal(s, "nvcc -o 'a b' 'it'\\''s' '' 'x=$HOME' -DN=4 /p/q.cu");
    free(s);
    const char *none[] = {NULL};
    s = cuco_proc_argv_string(none);
    assert_string_equal(s, "");
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_codes_and_streams),
        cmocka_unit_test(test_segv_reported_as_signal),
        cmocka_unit_test(test_hang_killed_at_timeout),
        cmocka_unit_test(test_sigterm_ignored_then_sigkill),
        cmocka_unit_test(test_grandchild_killed_parent_exited),
        cmocka_unit_test(test_grandchild_killed_parent_sleeps),
        cmocka_unit_test(test_detached_leftover_killed),
        cmocka_unit_test(test_gigabyte_capped),
        cmocka_unit_test(test_both_streams_no_deadlock),
        cmocka_unit_test(test_env_set),
        cmocka_unit_test(test_stdin),
        cmocka_unit_test(test_caller_with_closed_stdin),
        cmocka_unit_test(test_missing_program),
        cmocka_unit_test(test_cwd),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_caller_death_stops_child),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_argv_string),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
