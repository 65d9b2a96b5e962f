/* cmd_serve.c: 'cuco serve': the web UI over a run's database until Ctrl-C. */
#include "cli_options.h"
#include "commands.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuco/report.h"
#include "cuco/web.h"

static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static const cli_command serve_command = {
    "serve",
    "[WORKSPACE] [OPTIONS]",
    "Serves a web UI over the run database of WORKSPACE (a folder with runs.db,\n"
    "or the database file itself; default: ./runs.db or the only\n"
    "./cuco-out/NAME/): live score plots, the lineage tree, each program's\n"
    "code and diff, failures and spend. Read-only; works while 'cuco evolve'\n"
    "writes, and the open page updates itself every 3 s. Stop with Ctrl-C.\n",
    "Watching a run on a remote machine: keep the default host and forward the\n"
    "port, e.g. 'ssh -L 8765:127.0.0.1:8765 gpu-box', then open\n"
    "http://127.0.0.1:8765/ here. The URL #program=ID opens one program.\n"
    "The API (JSON, GET only) is described in docs/web.md.\n"
    "\n"
    "Exit status: 0 stopped by Ctrl-C, 1 it could not serve, 2 bad usage or no\n"
    "run database found.\n",
    "WORKSPACE",
    0,
    1,
    0};

int cmd_serve(int argc, char **argv)
{
    const char *host = "127.0.0.1";
    int port = 8765;
    const cli_option options[] = {
        CLI_OPT_INT("port", 0, &port, "N", "port to listen on (default 8765; 0: any free port)", 0,
                    65535),
        CLI_OPT_STRING(
            "host", 0, &host, "ADDR",
            "address to bind (default 127.0.0.1; use 0.0.0.0 to expose\nit to the network, at "
            "your own risk: there is no login)"),
        CLI_OPT_END};
    cli_args args;
    int code = cli_parse(&serve_command, options, argc, argv, &args);
    if (code != CLI_CONTINUE)
        return code;
    const char *workspace_arg = args.n_pos ? args.pos[0] : NULL;
    cli_args_free(&args);
    cuco_err e = CUCO_ERR_INIT;
    char *workspace = NULL, *db_path = NULL;
    cuco_web_server *server = NULL;
    code = CLI_EXIT_FAILED;
    if (report_workspace_find(workspace_arg, &workspace, &db_path, &e) < 0) {
        cuco_err_print(&e, "cuco serve", stderr);
        code = 2;
        goto out;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    cuco_web_opts opts = {db_path, workspace, host, port};
    if (web_server_start(&opts, &server, &e) < 0) {
        cuco_err_print(&e, "cuco serve", stderr);
        code = e.code == CUCO_EINVAL ? 2 : 1; /* a bad --host or --port is bad usage */
        goto out;
    }
    int ipv6 = strchr(host, ':') != NULL;
    printf("cuco serve: http://%s%s%s:%d/ (database %s; Ctrl-C to stop)\n", ipv6 ? "[" : "", host,
           ipv6 ? "]" : "", web_server_port(server), db_path);
    fflush(stdout);
    while (!stop_requested) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "cuco serve: stopping\n");
    code = 0;
out:
    web_server_stop(server);
    free(workspace);
    free(db_path);
    cuco_err_clear(&e);
    return code;
}
