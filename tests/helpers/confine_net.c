/* confine_net: what a confined program sees of the network. Connects to
 * 127.0.0.1:PORT (a port the test listens on outside) and prints
 * "outside-reachable" or "outside-unreachable"; then listens on a loopback
 * port of its own and connects to it: "loopback-ok" or "loopback-failed". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int connect_to(struct sockaddr_in *addr)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return -1;
    int rc = connect(s, (struct sockaddr *)addr, sizeof *addr);
    close(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: confine_net PORT\n");
        return 2;
    }
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    puts(connect_to(&addr) == 0 ? "outside-reachable" : "outside-unreachable");

    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in own;
    socklen_t len = sizeof own;
    memset(&own, 0, sizeof own);
    own.sin_family = AF_INET;
    own.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = l >= 0 && bind(l, (struct sockaddr *)&own, sizeof own) == 0 && listen(l, 1) == 0 &&
             getsockname(l, (struct sockaddr *)&own, &len) == 0 && connect_to(&own) == 0;
    puts(ok ? "loopback-ok" : "loopback-failed");
    return 0;
}
