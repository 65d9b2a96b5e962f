/* web_server.c: the HTTP side of the web UI: a libmicrohttpd daemon with its
 * own polling thread that hands each request to web_handle() (web_api.c).
 * Only GET and HEAD are answered; request bodies are never read. A query
 * with a NUL byte (%00) is refused with 400 here, where its length is still
 * known; web_handle() refuses bytes that are not UTF-8. */
#include "cuco/web.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "cuco/buf.h"
#include "cuco/grow.h"
#include "cuco/log.h"

struct cuco_web_server {
    struct MHD_Daemon *daemon;
    char *db_path, *workspace;
    int port;
};

typedef struct param_list {
    cuco_web_param *v;
    size_t n, cap;
    int oom;
    int nul; /* a key or value held a NUL byte (%00): C strings would cut it */
} param_list;

static enum MHD_Result collect_param(void *cls, enum MHD_ValueKind kind, const char *key,
                                     size_t key_size, const char *value, size_t value_size)
{
    param_list *l = cls;
    (void)kind;
    if (strlen(key) != key_size || (value && strlen(value) != value_size))
        l->nul = 1;
    if (CUCO_GROW(l->v, l->cap, l->n + 1, 8) < 0) {
        l->oom = 1;
        return MHD_NO;
    }
    l->v[l->n++] = (cuco_web_param){key, value};
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    struct cuco_web_server *s = cls;
    (void)version;
    (void)upload_data;
    /* the first call only announces the headers; answer on the second so
     * that a request body (never used) is not left half-read */
    if (*req_cls == NULL) {
        static int seen;
        *req_cls = &seen;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* discard */
        return MHD_YES;
    }
    param_list params = {NULL, 0, 0, 0, 0};
    MHD_get_connection_values_n(conn, MHD_GET_ARGUMENT_KIND, collect_param, &params);
    cuco_web_response res;
    if (params.nul)
        web_bad_request("the query holds a NUL byte", &res);
    else
        web_handle(s->db_path, s->workspace, method, url, params.v, params.n, &res);
    free(params.v);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        res.len, res.body, res.body_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_COPY);
    if (!r) {
        web_response_free(&res);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res.content_type);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    if (res.status == 405)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    cuco_debug("web: %s %s -> %d", method, url, res.status);
    enum MHD_Result ok = MHD_queue_response(conn, (unsigned)res.status, r);
    MHD_destroy_response(r);
    web_response_free(&res);
    return ok;
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    cuco_buf b = CUCO_BUF_INIT;
    if (cuco_buf_vprintf(&b, fmt, ap) == 0) {
        char *msg = cuco_str_trim(b.data ? b.data : (char *)"");
        if (*msg)
            cuco_warn("web server: %s", msg);
    }
    cuco_buf_free(&b);
}

int web_server_start(const cuco_web_opts *opts, cuco_web_server **out, cuco_err *e)
{
    *out = NULL;
    if (opts->port < 0 || opts->port > 65535)
        return cuco_err_set(e, CUCO_EINVAL, "bad port %d", opts->port);
    const char *host = opts->host ? opts->host : "127.0.0.1";
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)opts->port);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)opts->port);
        flags |= MHD_USE_IPv6;
    } else
        return cuco_err_set(e, CUCO_EINVAL,
                            "bad host '%s': expected an IPv4 or IPv6 address such as 127.0.0.1",
                            host);
    struct cuco_web_server *s = calloc(1, sizeof *s);
    if (!s)
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    s->db_path = cuco_strdup(opts->db_path);
    s->workspace = cuco_strdup(opts->workspace);
    if (!s->db_path || (opts->workspace && !s->workspace)) {
        web_server_stop(s);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    }
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)opts->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_log,
        NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned int)30, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64, MHD_OPTION_END);
    if (!s->daemon) {
        web_server_stop(s);
        return cuco_err_set(e, CUCO_ESYS, "cannot listen on %s port %d (in use, or not allowed?)",
                            host, opts->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : opts->port;
    *out = s;
    return 0;
}

int web_server_port(const cuco_web_server *s)
{
    return s->port;
}

void web_server_stop(cuco_web_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    free(s->db_path);
    free(s->workspace);
    free(s);
}
