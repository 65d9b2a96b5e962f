/* warning.c: the verification warning that 'cuco bound' leaves in a
 * workspace's bound.json, read back for the commands that print speedups, so
 * that a speedup measured under a hollow verification is never shown alone. */
#include "cuco/bound.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cuco/buf.h"
#include "cuco/fs.h"

int cuco_bound_read_warning(const char *workspace, char **message, cuco_err *e)
{
    *message = NULL;
    char *path = cuco_path_join(workspace, "bound.json");
    if (!cuco_fs_exists(path)) {
        free(path);
        return 0;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        int rc = cuco_err_set_at(e, CUCO_EINVAL, path, jerr.line, "%s", jerr.text);
        free(path);
        return rc;
    }
    json_t *audit = json_object_get(root, "verification_audit");
    int warn = json_is_true(json_object_get(audit, "warning"));
    if (warn) {
        const char *stat =
            json_string_value(json_object_get(json_object_get(audit, "static"), "summary"));
        int dyn = json_is_true(json_object_get(json_object_get(audit, "dynamic"), "finding"));
        int stat_finding =
            json_is_true(json_object_get(json_object_get(audit, "static"), "finding"));
        cuco_buf b = CUCO_BUF_INIT;
        cuco_buf_puts(&b, "verification may not check the results (cuco bound):");
        if (stat_finding)
            cuco_buf_printf(&b, " %s;", stat ? stat : "static audit finding");
        if (dyn)
            cuco_buf_puts(&b, " the program still passes with its communication removed;");
        b.data[b.len - 1] = b.data[b.len - 1] == ';' ? '.' : b.data[b.len - 1];
        *message = cuco_buf_detach(&b);
    }
    json_decref(root);
    free(path);
    return warn;
}
