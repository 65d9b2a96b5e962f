/* cmd_serve.c: 'cuco serve': the web UI over a run's database until Ctrl-C. */
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

static void usage(FILE *out)
{
    fprintf(out, "usage: cuco serve [WORKSPACE] [--port N] [--host ADDR]\n"
                 "\n"
                 "Serves a web UI over the run database of WORKSPACE (a folder with runs.db,\n"
                 "or the database file itself; default: ./runs.db or the only\n"
                 "./cuco-out/NAME/): live score plots, the lineage tree, each program's\n"
                 "code and diff, failures and spend. Read-only; works while 'cuco evolve'\n"
                 "writes, and the open page updates itself every 3 s. Stop with Ctrl-C.\n"
                 "\n"
                 "Options:\n"
                 "  --port N     port to listen on (default 8765; 0: any free port)\n"
                 "  --host ADDR  address to bind (default 127.0.0.1; use 0.0.0.0 to expose\n"
                 "               it to the network, at your own risk: there is no login)\n"
                 "  -h, --help   this help\n"
                 "\n"
                 "Watching a run on a remote machine: keep the default host and forward the\n"
                 "port, e.g. 'ssh -L 8765:127.0.0.1:8765 gpu-box', then open\n"
                 "http://127.0.0.1:8765/ here. The URL #program=ID opens one program.\n"
                 "The API (JSON, GET only) is described in docs/web.md.\n");
}

int cmd_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *workspace_arg = NULL, *host = "127.0.0.1";
    long port = 8765;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--port") || !strcmp(argv[i], "--host")) && i + 1 >= argc) {
            fprintf(stderr, "cuco serve: %s needs a value\n", argv[i]);
            return 2;
        }
        if (!strcmp(argv[i], "--port")) {
            char *end;
            port = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || port < 0 || port > 65535) {
                fprintf(stderr, "cuco serve: bad port '%s' (0..65535)\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--host"))
            host = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "cuco serve: unknown option %s\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (!workspace_arg)
            workspace_arg = argv[i];
        else {
            fprintf(stderr, "cuco serve: one workspace only\n");
            return 2;
        }
    }
    cuco_err e = CUCO_ERR_INIT;
    char *workspace = NULL, *db_path = NULL;
    cuco_web_server *server = NULL;
    int code = 1;
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
    cuco_web_opts opts = {db_path, workspace, host, (int)port};
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
