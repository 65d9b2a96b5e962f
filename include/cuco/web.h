/* web.h: the web UI over a run's database: a read-only JSON API and one
 * embedded static page, served by libmicrohttpd.
 *
 * The API (all GET/HEAD, JSON bodies; see docs/web.md):
 *   /api/runs                 runs with program counts and best score
 *   /api/programs             ?run=&status=&island=&generation=&limit=&order=
 *   /api/programs/ID          one program: code, diff against its parent,
 *                             metrics, knobs, error excerpt, children
 *   /api/evaluations          ?run=  evaluated programs in order, best so far
 *   /api/llm                  ?run=  calls, tokens and spend per model
 *   /api/meta                 ?run=  meta summaries
 *   /api/summary              ?run=  as report_summary() (report.h)
 * Errors are JSON {"error": "..."} with 400 (bad parameter), 404 (unknown
 * path or id), 405 (a method other than GET/HEAD). Nothing is written.
 */
#ifndef CUCO_WEB_H
#define CUCO_WEB_H

#include <stddef.h>

#include "cuco/err.h"

typedef struct cuco_web_param {
    const char *key, *value; /* value may be NULL ("?flag") */
} cuco_web_param;

typedef struct cuco_web_response {
    int status; /* HTTP status */
    char *body; /* owned unless body_static */
    size_t len;
    const char *content_type; /* static string */
    int body_static;          /* 1: body points into the embedded files */
} cuco_web_response;
void web_response_free(cuco_web_response *r);

/* Answers one request without any network: method, path (no query string)
 * and the query parameters. db_path is opened read-only for the request;
 * workspace (may be NULL) is where bound.json and the like are looked up.
 * Always fills res (errors become HTTP error responses); returns 0, or
 * CUCO_ENOMEM when even the error response could not be made. */
int web_handle(const char *db_path, const char *workspace, const char *method, const char *path,
               const cuco_web_param *params, size_t nparams, cuco_web_response *res);

/* Fills res with a 400 JSON error that says why, for a request the server
 * refuses before web_handle (a NUL byte in the query). */
void web_bad_request(const char *why, cuco_web_response *res);

typedef struct cuco_web_server cuco_web_server; /* opaque */

typedef struct cuco_web_opts {
    const char *db_path;   /* required */
    const char *workspace; /* may be NULL */
    const char *host;      /* NULL: 127.0.0.1; an IPv4 or IPv6 literal */
    int port;              /* 0: the system picks a free one */
} cuco_web_opts;

/* Starts serving on a thread of its own; web_server_port() says the port
 * bound. Stop with web_server_stop() (frees the server). */
int web_server_start(const cuco_web_opts *opts, cuco_web_server **out, cuco_err *e);
int web_server_port(const cuco_web_server *s);
void web_server_stop(cuco_web_server *s);

#endif
