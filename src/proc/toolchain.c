/* toolchain.c: finds nvcc, NCCL (headers, library, version, device API and
 * GIN headers) and MPI on this machine (contract in include/cuco/toolchain.h).
 *
 * Detection never fails for a missing piece: whatever is not found stays
 * NULL or 0 and the caller (cuco doctor, the build step) decides whether it
 * matters. The NCCL version comes from the NCCL_MAJOR/MINOR/PATCH defines of
 * nccl.h; the library's own version from the "NCCL version X.Y.Z" text it
 * carries, so a header/library mismatch can be reported without loading it.
 */
#define _GNU_SOURCE /* memmem */
#include "cuco/toolchain.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuco/buf.h"
#include "cuco/fs.h"
#include "cuco/proc.h"

int cuco_nccl_version_code(int major, int minor, int patch)
{
    if (major <= 2 && minor <= 8)
        return major * 1000 + minor * 100 + patch;
    return major * 10000 + minor * 100 + patch;
}

char *cuco_nccl_version_string(int code)
{
    if (code <= 0)
        return cuco_strdup("unknown");
    if (code < 10000)
        return cuco_sprintf("%d.%d.%d", code / 1000, (code / 100) % 10, code % 100);
    return cuco_sprintf("%d.%d.%d", code / 10000, (code / 100) % 100, code % 100);
}

/* Value of "#define NAME <int>" in text; -1 when absent. */
static int header_define_int(const char *text, const char *name)
{
    size_t name_len = strlen(name);
    for (const char *p = strstr(text, "#define"); p; p = strstr(p + 1, "#define")) {
        const char *q = p + 7;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, name, name_len) != 0 || (q[name_len] != ' ' && q[name_len] != '\t'))
            continue;
        q += name_len;
        char *end = NULL;
        long v = strtol(q, &end, 10);
        if (end == q)
            return -1;
        return (int)v;
    }
    return -1;
}

/* Version code from nccl.h; 0 when it cannot be read. */
static int nccl_header_version(const char *nccl_h)
{
    char *text = NULL;
    size_t len = 0;
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_fs_read(nccl_h, &text, &len, &e) != 0) {
        cuco_err_clear(&e);
        return 0;
    }
    int major = header_define_int(text, "NCCL_MAJOR");
    int minor = header_define_int(text, "NCCL_MINOR");
    int patch = header_define_int(text, "NCCL_PATCH");
    free(text);
    if (major < 0 || minor < 0 || patch < 0)
        return 0;
    return cuco_nccl_version_code(major, minor, patch);
}

/* Version code from the "NCCL version X.Y.Z" text inside the library;
 * 0 when absent. The file is mapped, not read, as it is hundreds of MB. */
static int nccl_library_version(const char *lib_path)
{
    int fd = open(lib_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int code = 0;
    if (fstat(fd, &st) != 0 || st.st_size <= 0) {
        close(fd);
        return 0;
    }
    size_t size = (size_t)st.st_size;
    const char *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return 0;
    static const char needle[] = "NCCL version ";
    const size_t needle_len = sizeof needle - 1;
    const char *p = map;
    const char *end = map + size;
    while (p < end && !code) {
        const char *hit = memmem(p, (size_t)(end - p), needle, needle_len);
        if (!hit)
            break;
        const char *q = hit + needle_len;
        int parts[3] = {0, 0, 0}, n = 0;
        while (n < 3 && q < end && *q >= '0' && *q <= '9') {
            int v = 0;
            while (q < end && *q >= '0' && *q <= '9' && v < 100000)
                v = v * 10 + (*q++ - '0');
            parts[n++] = v;
            if (q < end && *q == '.')
                q++;
            else
                break;
        }
        if (n == 3)
            code = cuco_nccl_version_code(parts[0], parts[1], parts[2]);
        p = hit + needle_len;
    }
    munmap((void *)map, size);
    return code;
}

/* First folder in dirs (NULL-terminated, relative to root or absolute when
 * root is NULL) that holds libnccl.so.2; caller frees; NULL if none. */
static char *find_nccl_lib(const char *root, const char *const *dirs)
{
    for (size_t i = 0; dirs[i]; i++) {
        char *dir = root ? cuco_path_join(root, dirs[i]) : cuco_strdup(dirs[i]);
        char *lib = cuco_path_join(dir, "libnccl.so.2");
        int found = cuco_fs_exists(lib);
        free(lib);
        if (found)
            return dir;
        free(dir);
    }
    return NULL;
}

/* Fills the NCCL fields from include_dir if it holds nccl.h; returns 1 when
 * it did, 0 when nccl.h is not there, -1 when out of memory. */
static int try_nccl(cuco_toolchain *tc, const char *include_dir, const char *lib_root,
                    const char *const *lib_dirs, const char *source)
{
    char *nccl_h = cuco_path_join(include_dir, "nccl.h");
    int found = cuco_fs_exists(nccl_h);
    if (!found) {
        free(nccl_h);
        return 0;
    }
    tc->nccl_include = cuco_strdup(include_dir);
    tc->nccl_source = cuco_strdup(source);
    if (!tc->nccl_include || !tc->nccl_source) {
        free(nccl_h);
        return -1;
    }
    tc->nccl_version = nccl_header_version(nccl_h);
    free(nccl_h);

    char *device_h = cuco_path_join(include_dir, "nccl_device.h");
    char *gin_h = cuco_path_join(include_dir, "nccl_device/gin.h");
    tc->nccl_device_api = cuco_fs_exists(device_h);
    tc->nccl_gin = cuco_fs_exists(gin_h);
    free(device_h);
    free(gin_h);

    tc->nccl_lib = find_nccl_lib(lib_root, lib_dirs);
    if (tc->nccl_lib) {
        char *lib = cuco_path_join(tc->nccl_lib, "libnccl.so.2");
        tc->nccl_lib_version = nccl_library_version(lib);
        free(lib);
    }
    return 1;
}

/* "13.0" from nvcc's "Cuda compilation tools, release 13.0, V13.0.88";
 * caller frees; NULL when nvcc cannot be run or says something else. */
static char *nvcc_release(const char *nvcc)
{
    const char *argv[] = {nvcc, "--version", NULL};
    cuco_proc_opts opts = {.argv = argv, .timeout_s = 30, .merge_stderr = 1};
    cuco_proc_result res;
    cuco_err e = CUCO_ERR_INIT;
    char *version = NULL;
    if (cuco_proc_run(&opts, &res, &e) != 0) {
        cuco_err_clear(&e);
        return NULL;
    }
    const char *p = res.exited && res.exit_code == 0 ? strstr(res.out, "release ") : NULL;
    if (p) {
        p += strlen("release ");
        size_t n = strspn(p, "0123456789.");
        if (n > 0)
            version = cuco_strndup(p, n);
    }
    cuco_proc_result_free(&res);
    return version;
}

static char *env_dir(const char *name)
{
    const char *v = getenv(name);
    return v && *v && cuco_fs_is_dir(v) ? cuco_strdup(v) : NULL;
}

int cuco_toolchain_detect(cuco_toolchain *tc, cuco_err *e)
{
    memset(tc, 0, sizeof *tc);

    /* CUDA toolkit: $CUDA_HOME, then /usr/local/cuda, then nvcc's parent. */
    char *nvcc_in_path = cuco_which("nvcc");
    tc->cuda_home = env_dir("CUDA_HOME");
    if (!tc->cuda_home && cuco_fs_is_dir("/usr/local/cuda"))
        tc->cuda_home = cuco_strdup("/usr/local/cuda");
    if (!tc->cuda_home && nvcc_in_path) {
        char *bin = cuco_path_dirname(nvcc_in_path);
        tc->cuda_home = cuco_path_dirname(bin);
        free(bin);
    }
    if (tc->cuda_home) {
        char *nvcc = cuco_path_join(tc->cuda_home, "bin/nvcc");
        if (access(nvcc, X_OK) == 0)
            tc->nvcc = nvcc;
        else
            free(nvcc);
    }
    if (!tc->nvcc) {
        tc->nvcc = nvcc_in_path;
        nvcc_in_path = NULL;
    }
    free(nvcc_in_path);
    if (tc->nvcc)
        tc->nvcc_version = nvcc_release(tc->nvcc);

    /* NCCL: NCCL_HOME, then the CUDA toolkit, then the system. */
    static const char *const home_libs[] = {"lib", "lib64", NULL};
    static const char *const cuda_libs[] = {"lib64", "lib", "targets/x86_64-linux/lib", NULL};
    static const char *const system_libs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib",
                                              "/usr/local/lib", NULL};
    char *nccl_home = env_dir("NCCL_HOME");
    int found = 0;
    if (nccl_home) {
        char *inc = cuco_path_join(nccl_home, "include");
        found = try_nccl(tc, inc, nccl_home, home_libs, "NCCL_HOME");
        free(inc);
    }
    if (!found && tc->cuda_home) {
        char *inc = cuco_path_join(tc->cuda_home, "include");
        found = try_nccl(tc, inc, tc->cuda_home, cuda_libs, "CUDA toolkit");
        free(inc);
    }
    if (!found)
        found = try_nccl(tc, "/usr/include", NULL, system_libs, "system");
    if (!found)
        found = try_nccl(tc, "/usr/local/include", NULL, system_libs, "system");
    free(nccl_home);

    tc->mpicc = cuco_which("mpicc");
    tc->mpirun = cuco_which("mpirun");

    if (found < 0) {
        cuco_toolchain_free(tc);
        return cuco_err_set(e, CUCO_ENOMEM, "out of memory detecting the toolchain");
    }
    return 0;
}

void cuco_toolchain_free(cuco_toolchain *tc)
{
    if (!tc)
        return;
    free(tc->cuda_home);
    free(tc->nvcc);
    free(tc->nvcc_version);
    free(tc->nccl_include);
    free(tc->nccl_lib);
    free(tc->nccl_source);
    free(tc->mpicc);
    free(tc->mpirun);
    memset(tc, 0, sizeof *tc);
}
