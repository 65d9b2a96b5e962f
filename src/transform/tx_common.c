/* tx_common.c: pieces both transform routes (rules, LLM) use to write and
 * describe gen_0: GPU presence, the seed -> program diff, an eval result as
 * JSON. */
#include "tx_common.h"

#include "cuco/buf.h"
#include "cuco/db.h"
#include "cuco/fs.h"
#include "cuco/hash.h"
#include "cuco/mutate.h"
#include "cuco/proc.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cuco_tx_have_gpu(void)
{
    if (access("/dev/nvidia0", F_OK) == 0)
        return 1;
    char *smi = cuco_which("nvidia-smi");
    int yes = smi != NULL;
    free(smi);
    return yes;
}

int cuco_tx_make_diff(const char *seed_path, const char *prog_path, const char *label, char **out,
                      cuco_err *e)
{
    char *la = cuco_sprintf("a/%s", label), *lb = cuco_sprintf("b/%s", label);
    const char *argv[] = {"diff", "-u", "--label", la, "--label", lb, seed_path, prog_path, NULL};
    cuco_proc_opts po;
    memset(&po, 0, sizeof(po));
    po.argv = argv;
    po.timeout_s = 30;
    po.capture_cap = 64u << 20;
    cuco_proc_result pr;
    int rc =
        (la && lb) ? cuco_proc_run(&po, &pr, e) : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    free(la);
    free(lb);
    if (rc != 0)
        return cuco_err_prefix(e, "diff");
    if (!pr.exited || pr.exit_code > 1) {
        rc = cuco_err_set(e, CUCO_EIO, "diff failed: %s", pr.err ? pr.err : "");
        cuco_proc_result_free(&pr);
        return rc;
    }
    *out = cuco_strdup(pr.out ? pr.out : "");
    cuco_proc_result_free(&pr);
    return *out ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
}

int cuco_tx_write_report(const char *gen0, const json_t *rep, const char *md, char **report_json,
                         cuco_err *e)
{
    char *jtext = json_dumps(rep, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    char *jpath = cuco_path_join(gen0, "transform_report.json");
    char *mpath = cuco_path_join(gen0, "transform_report.md");
    int rc = (jtext && jpath && mpath) ? 0 : cuco_err_set(e, CUCO_ENOMEM, "out of memory");
    if (rc == 0)
        rc = cuco_fs_write(jpath, jtext, strlen(jtext), e);
    if (rc == 0)
        rc = cuco_fs_write(mpath, md, strlen(md), e);
    if (rc == 0 && report_json) {
        *report_json = jtext;
        jtext = NULL;
    }
    free(jtext);
    free(jpath);
    free(mpath);
    return rc;
}

json_t *cuco_tx_eval_json(const cuco_eval_result *r)
{
    json_t *o = json_pack("{s:s, s:i, s:s}", "status", cuco_eval_status_name(r->status), "level",
                          r->level, "hash", r->program_hash);
    if (r->level >= 3)
        json_object_set_new(o, "time_ms", json_real(r->time_ms));
    if (r->excerpt)
        json_object_set_new(o, "excerpt", json_string(r->excerpt));
    return o;
}

double cuco_tx_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int cuco_tx_insert_root(struct cuco_db *db, const cuco_tx_root *root, int64_t *prog_id, cuco_err *e)
{
    char *knobs = NULL;
    cuco_err ke = CUCO_ERR_INIT; /* a program without knobs is still a root */
    cuco_knobs_json(root->program, &knobs, &ke);
    cuco_err_clear(&ke);
    char hash[17];
    cuco_hash_hex(root->program, strlen(root->program), hash);
    cuco_db_program p;
    memset(&p, 0, sizeof p);
    p.run_id = root->run_id;
    p.code = (char *)root->program;
    p.code_hash = hash;
    p.mutator = (char *)root->mutator;
    p.patch_type = (char *)root->patch_type;
    p.description = (char *)root->description;
    p.status = (char *)root->status;
    p.score = root->seed_ms > 0 && root->time_ms > 0 ? root->seed_ms / root->time_ms : -1;
    p.time_ms = root->time_ms > 0 ? root->time_ms : -1;
    p.metrics_json = (char *)root->metrics_json;
    p.knobs_json = knobs;
    p.created_at = cuco_tx_now_s();
    int rc = db_program_insert(db, &p, prog_id, e);
    free(knobs);
    return rc;
}
