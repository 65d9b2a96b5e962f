/* test_confine.c: confinement of the commands an evaluation runs: the
 * environment scrub, and real confined runs through cuco_proc_run (processes
 * left behind are ended, writes outside the writable folder fail, /proc and
 * the network are the namespace's own, secrets and descriptors do not reach
 * the program, a timeout still ends everything). Where the host cannot make
 * namespaces the confined runs are skipped with a message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
/* cmocka.h needs the three above first */
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/confine.h"
#include "cuco/fs.h"
#include "cuco/proc.h"

static char *work_dir;    /* writable inside */
static char *outside_dir; /* its parent: read-only inside */
static int namespaces_ok;
static char *why_not;

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define NEED_NAMESPACES()                                                                          \
    do {                                                                                           \
        if (!namespaces_ok) {                                                                      \
            print_message("confinement unavailable here (%s): skipped\n", why_not);                \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Runs `sh -c script` confined (or not), writable = work_dir. */
static int run_sh(const char *script, int confined, const char *const *env_set, double timeout,
                  cuco_proc_result *res)
{
    const char *writable[] = {work_dir, NULL};
    const char *secret_names[] = {"MY_LLM_KEY", NULL};
    /* the test's folders and helpers stay in sight where the private /tmp
     * would hide them (a checkout under /tmp) */
    const char *visible[] = {outside_dir, getenv("CUCO_TEST_HELPERS"), NULL};
    cuco_confine c = {.enabled = confined,
                      .writable = writable,
                      .visible = visible,
                      .secret_names = secret_names};
    const char *argv[] = {"sh", "-c", script, NULL};
    cuco_proc_opts o = {.argv = argv,
                        .cwd = work_dir,
                        .env_set = env_set,
                        .timeout_s = timeout,
                        .kill_grace_s = 1,
                        .confine = &c};
    cuco_err e = CUCO_ERR_INIT;
    int rc = cuco_proc_run(&o, res, &e);
    if (rc)
        print_message("cuco_proc_run: %s\n", cuco_err_msg(&e));
    cuco_err_clear(&e);
    return rc;
}

/* Processes on the host (not zombies) whose command line holds marker. */
static int count_alive_with(const char *marker)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        char path[300], buf[4096], stat[512];
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        int fd = open(path, O_RDONLY);
        ssize_t len = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (len <= 0)
            continue;
        for (ssize_t i = 0; i < len; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[len] = '\0';
        if (!strstr(buf, marker))
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        fd = open(path, O_RDONLY);
        len = fd >= 0 ? read(fd, stat, sizeof stat - 1) : -1;
        if (fd >= 0)
            close(fd);
        if (len <= 0)
            continue;
        stat[len] = '\0';
        const char *paren = strrchr(stat, ')');
        if (paren && (paren[2] == 'Z' || paren[2] == 'X'))
            continue;
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

static void test_env_keep(void **state)
{
    (void)state;
    const char *extra[] = {"MY_LLM_KEY", NULL};
    assert_int_equal(cuco_confine_env_keep("OPENAI_API_KEY=sk-1", NULL), 0);
    assert_int_equal(cuco_confine_env_keep("GITHUB_TOKEN=x", NULL), 0);
    assert_int_equal(cuco_confine_env_keep("aws_secret=x", NULL), 0);
    assert_int_equal(cuco_confine_env_keep("DB_PASSWORD=", NULL), 0);
    assert_int_equal(cuco_confine_env_keep("MY_LLM_KEY=x", extra), 0);
    assert_int_equal(cuco_confine_env_keep("MY_LLM_KEY=x", NULL), 1);
    assert_int_equal(cuco_confine_env_keep("MY_LLM_KEYS=x", extra), 1);
    assert_int_equal(cuco_confine_env_keep("PATH=/bin", extra), 1);
    assert_int_equal(cuco_confine_env_keep("TOKEN=x", NULL), 1);     /* no suffix, just the word */
    assert_int_equal(cuco_confine_env_keep("X=A_API_KEY", NULL), 1); /* the value does not count */

    char *env[] = {"PATH=/bin", "OPENAI_API_KEY=sk", "HOME=/root", "MY_LLM_KEY=1", NULL};
    assert_int_equal(cuco_confine_env_scrub(env, extra), 2);
    assert_string_equal(env[0], "PATH=/bin");
    assert_string_equal(env[1], "HOME=/root");
    assert_null(env[2]);
}

/* Children that ignore SIGTERM, leave the session, or just sleep in the
 * background all end with the program, and the program's status comes
 * through. */
static void test_leftovers_ended(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    char marker[32];
    snprintf(marker, sizeof marker, "9876.%d", (int)getpid());
    char *script = cuco_sprintf("sh -c 'trap \"\" TERM; sleep %s' &\n"
                                "setsid sleep %s &\n"
                                "sleep %s &\n"
                                "sleep 0.5; echo started; exit 3",
                                marker, marker, marker);
    cuco_proc_result r;
    double t0 = mono_now();
    assert_int_equal(run_sh(script, 1, NULL, 30, &r), 0);
    assert_true(mono_now() - t0 < 10);
    assert_false(r.timed_out);
    assert_true(r.exited);
    assert_int_equal(r.exit_code, 3);
    assert_non_null(strstr(r.out, "started"));
    assert_non_null(strstr(r.err, "cuco: ended 4 processes the program left running"));
    assert_int_equal(count_alive_with(marker), 0);
    cuco_proc_result_free(&r);
    free(script);
}

static void test_signal_relayed(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    cuco_proc_result r;
    assert_int_equal(run_sh("kill -SEGV $$", 1, NULL, 30, &r), 0);
    assert_true(r.signaled);
    assert_int_equal(r.term_signal, SIGSEGV);
    cuco_proc_result_free(&r);
}

static void test_writes_only_inside(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    char *outside = cuco_sprintf("%s/outside-%d", outside_dir, (int)getpid());
    char *inside = cuco_sprintf("%s/inside", work_dir);
    char *private_tmp = cuco_sprintf("/tmp/cuco-confine-private-%d", (int)getpid());
    char *script = cuco_sprintf("echo x > %s && echo inside-ok\n"
                                "echo x > %s 2>&1 || echo outside-blocked\n"
                                "echo x > %s && echo tmp-ok",
                                inside, outside, private_tmp);
    cuco_proc_result r;
    /* TMPDIR=/tmp (a common setting) must not bring the host's /tmp back */
    const char *tmpdir_env[] = {"TMPDIR=/tmp", NULL};
    assert_int_equal(run_sh(script, 1, tmpdir_env, 30, &r), 0);
    assert_non_null(strstr(r.out, "inside-ok"));
    assert_non_null(strstr(r.out, "outside-blocked"));
    assert_non_null(strstr(r.err, "Read-only file system"));
    assert_non_null(strstr(r.out, "tmp-ok"));
    assert_true(cuco_fs_exists(inside));
    assert_false(cuco_fs_exists(outside));
    assert_false(cuco_fs_exists(private_tmp)); /* /tmp inside is private */
    cuco_proc_result_free(&r);

    /* The same script unconfined writes outside: the check above can fail. */
    assert_int_equal(run_sh(script, 0, NULL, 30, &r), 0);
    assert_true(cuco_fs_exists(outside));
    cuco_proc_result_free(&r);
    unlink(outside);
    unlink(private_tmp);
    free(outside);
    free(inside);
    free(private_tmp);
    free(script);
}

/* Inside, PID 1 is the init and cuco's processes are not in /proc. */
static void test_proc_is_private(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    char *script = cuco_sprintf("echo pid=$$; test -e /proc/%d && echo host-visible; "
                                "ls /proc | grep -c '^[0-9]'",
                                (int)getpid());
    cuco_proc_result r;
    assert_int_equal(run_sh(script, 1, NULL, 30, &r), 0);
    assert_non_null(strstr(r.out, "pid=2\n"));
    assert_null(strstr(r.out, "host-visible"));
    const char *count = strrchr(r.out, '=');
    assert_non_null(count);
    int n = atoi(strchr(count, '\n') + 1);
    assert_true(n >= 2 && n <= 4); /* init, sh, ls (and grep) */
    cuco_proc_result_free(&r);
    free(script);
}

/* Init is a copy of cuco: its descriptors and memory are out of the
 * program's reach, and the program cannot undo the confinement (mount). */
static void test_cuco_out_of_reach(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    char *script = cuco_sprintf("ls /proc/1/fd/%d >/dev/null 2>&1 && echo fd-visible\n"
                                "head -c 1 /proc/1/mem >/dev/null 2>&1 && echo mem-readable\n"
                                "mount -t tmpfs none %s 2>/dev/null && echo mounted\n"
                                "mount -o remount,rw / 2>/dev/null && echo remounted\n"
                                "echo done",
                                fd, work_dir);
    cuco_proc_result r;
    assert_int_equal(run_sh(script, 1, NULL, 30, &r), 0);
    assert_string_equal(r.out, "done\n");
    cuco_proc_result_free(&r);
    close(fd);
    free(script);
}

static void test_network(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_true(l >= 0);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    const char *helpers = getenv("CUCO_TEST_HELPERS");
    assert_non_null(helpers);
    char *script = cuco_sprintf("%s/confine_net %d", helpers, (int)ntohs(a.sin_port));
    cuco_proc_result r;
    assert_int_equal(run_sh(script, 1, NULL, 30, &r), 0);
    assert_non_null(strstr(r.out, "outside-unreachable"));
    assert_non_null(strstr(r.out, "loopback-ok"));
    cuco_proc_result_free(&r);
    assert_int_equal(run_sh(script, 0, NULL, 30, &r), 0);
    assert_non_null(strstr(r.out, "outside-reachable"));
    cuco_proc_result_free(&r);
    close(l);
    free(script);
}

static void test_secrets_scrubbed(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    setenv("OPENAI_API_KEY", "sk-confine-test", 1);
    setenv("MY_LLM_KEY", "configured-key", 1);
    setenv("CUCO_CONFINE_TEST_KEEP", "kept", 1);
    const char *env_set[] = {"SERVICE_TOKEN=tok", "EXTRA_VAR=given", NULL};
    cuco_proc_result r;
    assert_int_equal(run_sh("env; cat /proc/1/environ", 1, env_set, 30, &r), 0);
    assert_null(strstr(r.out, "sk-confine-test")); /* nor in init's copy of cuco's */
    assert_null(strstr(r.out, "configured-key"));
    assert_null(strstr(r.out, "SERVICE_TOKEN"));
    assert_non_null(strstr(r.out, "CUCO_CONFINE_TEST_KEEP=kept"));
    assert_non_null(strstr(r.out, "EXTRA_VAR=given"));
    cuco_proc_result_free(&r);
    assert_int_equal(run_sh("env", 0, env_set, 30, &r), 0);
    assert_non_null(strstr(r.out, "sk-confine-test")); /* unconfined keeps it: as before */
    cuco_proc_result_free(&r);
    assert_int_equal(run_sh("env", 1, env_set, 30, &r), 0);
    assert_null(strstr(r.out, "OPENAI_API_KEY")); /* cuco's own environment is intact */
    assert_string_equal(getenv("OPENAI_API_KEY"), "sk-confine-test");
    cuco_proc_result_free(&r);
    unsetenv("OPENAI_API_KEY");
    unsetenv("MY_LLM_KEY");
    unsetenv("CUCO_CONFINE_TEST_KEEP");
}

/* A descriptor opened without O_CLOEXEC (the database, say) reaches no
 * program, confined or not. */
static void test_fds_not_inherited(void **state)
{
    (void)state;
    int fd = open("/dev/null", O_RDONLY); /* no O_CLOEXEC, on purpose */
    assert_true(fd > 2);
    char *script = cuco_sprintf("test -e /proc/self/fd/%d && echo leaked || echo closed", fd);
    cuco_proc_result r;
    assert_int_equal(run_sh(script, 0, NULL, 30, &r), 0);
    assert_string_equal(r.out, "closed\n");
    cuco_proc_result_free(&r);
    if (namespaces_ok) {
        assert_int_equal(run_sh(script, 1, NULL, 30, &r), 0);
        assert_string_equal(r.out, "closed\n");
        cuco_proc_result_free(&r);
    }
    close(fd);
    free(script);
}

static void test_rlimits(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    cuco_proc_result r;
    assert_int_equal(run_sh("echo core=$(ulimit -c) fsize=$(ulimit -f)", 1, NULL, 30, &r), 0);
    assert_non_null(strstr(r.out, "core=0 "));
    /* 8 GiB in the shell's 512-byte blocks */
    assert_non_null(strstr(r.out, "fsize=16777216"));
    cuco_proc_result_free(&r);
}

static void test_timeout_ends_everything(void **state)
{
    (void)state;
    NEED_NAMESPACES();
    char marker[32];
    snprintf(marker, sizeof marker, "8765.%d", (int)getpid());
    char *script = cuco_sprintf("setsid sleep %s & trap '' TERM; sleep %s", marker, marker);
    cuco_proc_result r;
    double t0 = mono_now();
    assert_int_equal(run_sh(script, 1, NULL, 1, &r), 0);
    assert_true(mono_now() - t0 < 6);
    assert_true(r.timed_out);
    assert_int_equal(count_alive_with(marker), 0);
    cuco_proc_result_free(&r);
    free(script);
}

static void test_bad_writable_folder(void **state)
{
    (void)state;
    const char *writable[] = {"/nonexistent/cuco-confine", NULL};
    cuco_confine c = {.enabled = 1, .writable = writable};
    const char *argv[] = {"true", NULL};
    cuco_proc_opts o = {.argv = argv, .confine = &c};
    cuco_proc_result r;
    cuco_err e = CUCO_ERR_INIT;
    assert_int_not_equal(cuco_proc_run(&o, &r, &e), 0);
    assert_non_null(strstr(cuco_err_msg(&e), "/nonexistent/cuco-confine"));
    cuco_err_clear(&e);
}

static int setup(void **state)
{
    (void)state;
    const char *base = getenv("CUCO_TEST_TMP");
    char *parent = cuco_sprintf("%s/confine-XXXXXX", base ? base : "/tmp");
    mkdir(base ? base : "/tmp", 0755);
    if (!mkdtemp(parent))
        return -1;
    outside_dir = parent;
    work_dir = cuco_sprintf("%s/work", parent);
    mkdir(work_dir, 0755);
    namespaces_ok = cuco_confine_probe(&why_not) == 0;
    if (!namespaces_ok)
        fprintf(stderr, "test_confine: confinement unavailable: %s\n", why_not);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cuco_err e = CUCO_ERR_INIT;
    cuco_fs_remove_tree(outside_dir, &e);
    cuco_err_clear(&e);
    free(work_dir);
    free(outside_dir);
    free(why_not);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_keep),
        cmocka_unit_test(test_leftovers_ended),
        cmocka_unit_test(test_signal_relayed),
        cmocka_unit_test(test_writes_only_inside),
        cmocka_unit_test(test_proc_is_private),
        cmocka_unit_test(test_cuco_out_of_reach),
        cmocka_unit_test(test_network),
        cmocka_unit_test(test_secrets_scrubbed),
        cmocka_unit_test(test_fds_not_inherited),
        cmocka_unit_test(test_rlimits),
        cmocka_unit_test(test_timeout_ends_everything),
        cmocka_unit_test(test_bad_writable_folder),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
