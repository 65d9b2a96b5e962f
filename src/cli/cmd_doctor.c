/* cmd_doctor.c: 'cuco doctor [--json]': what this machine has for cuco (GPUs
 * and the links between them, nvcc, NCCL and its device API, RDMA NICs for
 * GIN, MPI, Slurm, LLM keys, this build) and, plainly, what will not work.
 *
 * The facts are gathered once into a struct doctor_facts and then printed
 * either as text or as one JSON object, so both forms always say the same.
 * GPU facts come from nvidia-smi (run through cuco_proc_run); its absence or
 * failure means "no GPU". API keys are reported by name only: their values
 * never reach the output.
 */
#include "cli_options.h"
#include "commands.h"

#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <sqlite3.h>
#include <xxhash.h>
#include <yaml.h>

#include "cuco/buf.h"
#include "cuco/confine.h"
#include "cuco/fs.h"
#include "cuco/proc.h"
#include "cuco/toolchain.h"
#include "cuco/version.h"

#define DOCTOR_TOOL_TIMEOUT_S 20.0
/* The device API (nccl_device.h) arrived with NCCL 2.28.0. */
#define DOCTOR_NCCL_DEVICE_API_MIN 22800

typedef struct doctor_gpu {
    int index;
    char *name;
    long memory_mib;   /* -1 unknown */
    int sm_count;      /* 0 unknown */
    char *compute_cap; /* "9.0" or NULL */
} doctor_gpu;

typedef struct doctor_link {
    int a, b;
    char *kind;  /* nvidia-smi topo -m cell: "NV18", "PIX", "SYS", ... */
    int nvlinks; /* n of "NV<n>", else 0 */
    char *p2p;   /* nvidia-smi topo -p2p r cell ("OK", "NS", ...), or NULL */
} doctor_link;

typedef struct doctor_facts {
    /* GPUs */
    char *nvidia_smi;  /* path or NULL */
    char *gpu_problem; /* why no GPU list, or NULL */
    doctor_gpu *gpus;
    size_t n_gpus;
    doctor_link *links;
    size_t n_links;
    /* toolchain */
    cuco_toolchain tc;
    int nccl_device_api_usable;
    char *mpirun_version; /* first line of mpirun --version, or NULL */
    char *mpicxx;
    /* RDMA NICs from /sys/class/infiniband */
    char **rdma;
    size_t n_rdma;
    /* Slurm */
    char *sbatch, *srun;
    /* LLM keys: set or not */
    int key_anthropic, key_openai, base_url_openai, base_url_anthropic;
    /* confinement of builds and runs (cuco/confine.h) */
    int confine_off;    /* CUCO_CONFINE=0 */
    int confine_ok;     /* a confined `true` ran */
    char *confine_what; /* what is in force, or why it is not */
    /* what will not work, one sentence each */
    char **wont;
    size_t n_wont;
} doctor_facts;

static const cli_command doctor_command = {
    "doctor",
    "[OPTIONS]",
    "Shows what this machine has for cuco: GPUs (model, memory, SM count,\n"
    "NVLink/P2P between each pair), nvcc, NCCL (version, where it was found,\n"
    "device API and GIN headers), RDMA NICs, MPI, Slurm, which LLM API keys are\n"
    "set (names only, never values), and this build; then what will not work here.\n",
    "Environment: NCCL_HOME, CUDA_HOME (where to look for NCCL and nvcc), PATH.\n"
    "\n"
    "Exit status: 0 the facts were printed (whatever they say), 1 they could not\n"
    "be, 2 bad usage.\n",
    NULL,
    0,
    0,
    0};

static int push_str(char ***list, size_t *n, char *s)
{
    char **grown = realloc(*list, (*n + 1) * sizeof **list);
    if (!grown) {
        free(s);
        return -1;
    }
    *list = grown;
    (*list)[(*n)++] = s;
    return 0;
}

/* Runs argv; returns its stdout when it exited 0 (caller frees), else NULL
 * with *why (caller frees) saying what happened. */
static char *run_tool(const char *const *argv, char **why)
{
    cuco_proc_opts opts = {.argv = argv, .timeout_s = DOCTOR_TOOL_TIMEOUT_S};
    cuco_proc_result res;
    cuco_err e = CUCO_ERR_INIT;
    char *out = NULL;
    if (why)
        *why = NULL;
    if (cuco_proc_run(&opts, &res, &e) != 0) {
        if (why)
            *why = cuco_strdup(cuco_err_msg(&e));
        cuco_err_clear(&e);
        return NULL;
    }
    if (res.exited && res.exit_code == 0) {
        out = res.out;
        res.out = NULL;
    } else if (why) {
        char *how = cuco_proc_describe(&res);
        /* The first line of what it said is usually the reason. */
        const char *said = res.out_len ? res.out : res.err;
        size_t line_len = strcspn(said, "\n");
        *why = line_len ? cuco_sprintf("%s (%.*s)", how, (int)line_len, said) : cuco_strdup(how);
        free(how);
    }
    cuco_proc_result_free(&res);
    return out;
}

/* Removes ANSI escape sequences (nvidia-smi underlines headers) in place. */
static void strip_ansi(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (*r == '\x1b' && r[1] == '[') {
            r += 2;
            while (*r && !isalpha((unsigned char)*r))
                r++;
            if (*r)
                r++;
            continue;
        }
        *w++ = *r++;
    }
    *w = '\0';
}

/* 1 if tok is PREFIX followed by digits only. */
static int is_numbered(const char *tok, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(tok, prefix, n) != 0 || !tok[n])
        return 0;
    for (const char *p = tok + n; *p; p++)
        if (!isdigit((unsigned char)*p))
            return 0;
    return 1;
}

/* A GPU-by-GPU matrix as nvidia-smi topo prints it: cell[i][j] for GPUs i, j. */
typedef struct topo_matrix {
    size_t n;     /* GPUs */
    char **cells; /* n*n strings (owned), NULL where missing */
} topo_matrix;

static void topo_matrix_free(topo_matrix *m)
{
    for (size_t i = 0; i < m->n * m->n; i++)
        free(m->cells[i]);
    free(m->cells);
    m->cells = NULL;
    m->n = 0;
}

/* Parses the matrix part of `nvidia-smi topo -m` or `topo -p2p r`: a header
 * line of column names (GPU0 GPU1 ... NIC0 ...), then one row per device.
 * Only GPU-to-GPU cells are kept. Returns 0, or -1 if no matrix was found. */
static int topo_parse(const char *text, topo_matrix *m)
{
    memset(m, 0, sizeof *m);
    char *copy = cuco_strdup(text);
    if (!copy)
        return -1;
    strip_ansi(copy);
    char **cols = NULL;
    size_t n_cols = 0, n_gpu_cols = 0;
    int rc = -1;
    char *save_line = NULL;
    for (char *line = strtok_r(copy, "\n", &save_line); line;
         line = strtok_r(NULL, "\n", &save_line)) {
        if (strstr(line, "Legend"))
            break;
        char *save_tok = NULL;
        char *first = strtok_r(line, " \t", &save_tok);
        if (!first)
            continue;
        if (!cols) {
            if (!is_numbered(first, "GPU"))
                continue;
            /* header: column names while they are devices */
            for (char *tok = first; tok && (is_numbered(tok, "GPU") || is_numbered(tok, "NIC"));
                 tok = strtok_r(NULL, " \t", &save_tok)) {
                if (push_str(&cols, &n_cols, cuco_strdup(tok)) != 0)
                    goto out;
                if (is_numbered(tok, "GPU"))
                    n_gpu_cols++;
            }
            m->n = n_gpu_cols;
            size_t n_cells = n_gpu_cols * n_gpu_cols;
            m->cells = calloc(n_cells > 0 ? n_cells : 1, sizeof *m->cells);
            if (!m->cells)
                goto out;
            continue;
        }
        if (!is_numbered(first, "GPU"))
            continue;
        size_t row = (size_t)strtol(first + 3, NULL, 10);
        for (size_t c = 0; c < n_cols; c++) {
            char *tok = strtok_r(NULL, " \t", &save_tok);
            if (!tok)
                break;
            if (row < m->n && is_numbered(cols[c], "GPU")) {
                size_t col = (size_t)strtol(cols[c] + 3, NULL, 10);
                if (col < m->n) {
                    free(m->cells[row * m->n + col]);
                    m->cells[row * m->n + col] = cuco_strdup(tok);
                }
            }
        }
    }
    rc = cols && m->n ? 0 : -1;
out:
    for (size_t i = 0; i < n_cols; i++)
        free(cols[i]);
    free(cols);
    free(copy);
    if (rc != 0)
        topo_matrix_free(m);
    return rc;
}

/* SM counts of GPU models whose name pins them down (nvidia-smi cannot say). */
static int sm_count_from_model(const char *name)
{
    static const struct {
        const char *model;
        int sms;
    } known[] = {
        {"GH200", 132},    {"H200", 132},     {"H100 80GB HBM3", 132},
        {"H100 SXM", 132}, {"H100 NVL", 132}, {"H100 PCIe", 114},
        {"B200", 148},     {"A100", 108},     {"V100", 80},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strstr(name, known[i].model))
            return known[i].sms;
    return 0;
}

static void detect_gpus(doctor_facts *f)
{
    f->nvidia_smi = cuco_which("nvidia-smi");
    if (!f->nvidia_smi) {
        f->gpu_problem = cuco_strdup("nvidia-smi not found");
        return;
    }
    const char *query[] = {f->nvidia_smi, "--query-gpu=index,name,memory.total",
                           "--format=csv,noheader", NULL};
    char *why = NULL;
    char *list = run_tool(query, &why);
    if (!list) {
        f->gpu_problem = cuco_sprintf("nvidia-smi failed: %s", why ? why : "?");
        free(why);
        return;
    }
    char *save = NULL;
    for (char *line = strtok_r(list, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *first_comma = strchr(line, ',');
        char *last_comma = strrchr(line, ',');
        if (!first_comma || first_comma == last_comma)
            continue;
        *first_comma = *last_comma = '\0';
        doctor_gpu *grown = realloc(f->gpus, (f->n_gpus + 1) * sizeof *f->gpus);
        if (!grown)
            break;
        f->gpus = grown;
        doctor_gpu *g = &f->gpus[f->n_gpus++];
        memset(g, 0, sizeof *g);
        g->index = (int)strtol(line, NULL, 10);
        g->name = cuco_strdup(cuco_str_trim(first_comma + 1));
        char *mem = cuco_str_trim(last_comma + 1);
        g->memory_mib = isdigit((unsigned char)*mem) ? strtol(mem, NULL, 10) : -1;
        g->sm_count = sm_count_from_model(g->name);
    }
    free(list);
    if (f->n_gpus == 0) {
        f->gpu_problem = cuco_strdup("nvidia-smi lists no GPU");
        return;
    }

    /* Compute capability: older drivers lack the field; then it stays unknown. */
    const char *cap_query[] = {f->nvidia_smi, "--query-gpu=index,compute_cap",
                               "--format=csv,noheader", NULL};
    char *caps = run_tool(cap_query, NULL);
    for (char *line = caps ? strtok_r(caps, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        char *comma = strchr(line, ',');
        if (!comma)
            continue;
        int index = (int)strtol(line, NULL, 10);
        char *cap = cuco_str_trim(comma + 1);
        for (size_t i = 0; i < f->n_gpus; i++)
            if (f->gpus[i].index == index && isdigit((unsigned char)*cap))
                f->gpus[i].compute_cap = cuco_strdup(cap);
    }
    free(caps);

    if (f->n_gpus < 2)
        return;
    const char *topo_argv[] = {f->nvidia_smi, "topo", "-m", NULL};
    const char *p2p_argv[] = {f->nvidia_smi, "topo", "-p2p", "r", NULL};
    char *topo_text = run_tool(topo_argv, NULL);
    char *p2p_text = run_tool(p2p_argv, NULL);
    topo_matrix topo = {0, NULL}, p2p = {0, NULL};
    int have_topo = topo_text && topo_parse(topo_text, &topo) == 0;
    int have_p2p = p2p_text && topo_parse(p2p_text, &p2p) == 0;
    for (size_t i = 0; i < f->n_gpus; i++)
        for (size_t j = i + 1; j < f->n_gpus; j++) {
            size_t a = (size_t)f->gpus[i].index, b = (size_t)f->gpus[j].index;
            const char *kind =
                have_topo && a < topo.n && b < topo.n ? topo.cells[a * topo.n + b] : NULL;
            const char *ok = have_p2p && a < p2p.n && b < p2p.n ? p2p.cells[a * p2p.n + b] : NULL;
            doctor_link *grown = realloc(f->links, (f->n_links + 1) * sizeof *f->links);
            if (!grown)
                break;
            f->links = grown;
            doctor_link *l = &f->links[f->n_links++];
            l->a = (int)a;
            l->b = (int)b;
            l->kind = cuco_strdup(kind ? kind : "unknown");
            l->nvlinks = kind && is_numbered(kind, "NV") ? (int)strtol(kind + 2, NULL, 10) : 0;
            l->p2p = ok ? cuco_strdup(ok) : NULL;
        }
    topo_matrix_free(&topo);
    topo_matrix_free(&p2p);
    free(topo_text);
    free(p2p_text);
}

static void detect_rdma(doctor_facts *f)
{
    DIR *dir = opendir("/sys/class/infiniband");
    if (!dir)
        return;
    struct dirent *ent;
    while ((ent = readdir(dir)) != NULL)
        if (ent->d_name[0] != '.')
            push_str(&f->rdma, &f->n_rdma, cuco_strdup(ent->d_name));
    closedir(dir);
}

static void detect_mpi(doctor_facts *f)
{
    f->mpicxx = cuco_which("mpicxx");
    if (!f->tc.mpirun)
        return;
    const char *argv[] = {f->tc.mpirun, "--version", NULL};
    char *out = run_tool(argv, NULL);
    if (out) {
        /* "mpirun (Open MPI) 4.1.6" -> "Open MPI 4.1.6" */
        out[strcspn(out, "\n")] = '\0';
        char *line = cuco_str_trim(out);
        if (cuco_str_starts_with(line, "mpirun "))
            line += strlen("mpirun ");
        char *w = line;
        for (char *r = line; *r; r++)
            if (*r != '(' && *r != ')')
                *w++ = *r;
        *w = '\0';
        f->mpirun_version = cuco_strdup(line);
        free(out);
    }
}

static int env_set_nonempty(const char *name)
{
    const char *v = getenv(name);
    return v && *v;
}

static void wont(doctor_facts *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wont(doctor_facts *f, const char *fmt, ...)
{
    cuco_buf b = CUCO_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    cuco_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    push_str(&f->wont, &f->n_wont, cuco_buf_detach(&b));
}

/* The plain list of what will not work, from the facts above. */
static void judge(doctor_facts *f)
{
    const cuco_toolchain *tc = &f->tc;
    if (f->n_gpus == 0)
        wont(f, "no GPU: cuco can build GPU workloads but cannot run them (%s)", f->gpu_problem);
    else if (f->n_gpus == 1)
        wont(f, "one GPU only: workloads with 2 or more ranks cannot run here");
    for (size_t i = 0; i < f->n_links; i++) {
        const doctor_link *l = &f->links[i];
        if (l->nvlinks == 0)
            wont(f,
                 "GPU%d-GPU%d are not linked by NVLink (%s): LSA load/store between them goes over "
                 "PCIe "
                 "at best, and fused kernels will not gain what they gain on NVLink",
                 l->a, l->b, l->kind);
        if (l->p2p && strcmp(l->p2p, "OK") != 0)
            wont(f, "GPU%d-GPU%d: no peer-to-peer access (%s): LSA windows cannot span them", l->a,
                 l->b, l->p2p);
    }
    if (!tc->nvcc)
        wont(f, "no nvcc: GPU workloads cannot be built (set CUDA_HOME or put nvcc on PATH)");
    if (!tc->nccl_include) {
        wont(f, "no NCCL headers found (looked in NCCL_HOME, the CUDA toolkit, /usr/include): set "
                "NCCL_HOME");
    } else {
        char *hv = cuco_nccl_version_string(tc->nccl_version);
        if (!tc->nccl_lib)
            wont(f, "NCCL %s headers in %s have no libnccl.so.2 beside them: programs cannot link",
                 hv, tc->nccl_include);
        if (tc->nccl_lib && tc->nccl_lib_version && tc->nccl_version &&
            tc->nccl_lib_version != tc->nccl_version) {
            char *lv = cuco_nccl_version_string(tc->nccl_lib_version);
            wont(f, "nccl.h is %s but %s/libnccl.so.2 is %s: headers and library must not be mixed",
                 hv, tc->nccl_lib, lv);
            free(lv);
        }
        if (!f->nccl_device_api_usable)
            wont(f,
                 "NCCL %s has no usable device API (nccl_device.h, NCCL >= 2.28): device-initiated "
                 "programs cannot be built",
                 hv);
        free(hv);
    }
    if (!tc->nccl_gin)
        wont(f, "GIN: no GIN headers (nccl_device/gin.h, NCCL >= 2.28.7): the GIN backend cannot "
                "be built");
    if (f->n_rdma == 0)
        wont(f, "GIN: no RDMA NIC (/sys/class/infiniband is empty or missing): GIN programs cannot "
                "run; "
                "only the LSA backend (NVLink within one host) can");
    if (!tc->mpirun)
        wont(f, "no mpirun: multi-rank workloads cannot be launched on this host");
    if (!tc->mpicc && !f->mpicxx)
        wont(f, "no mpicc/mpicxx: workloads that use MPI cannot be built here");
    if (!f->sbatch || !f->srun)
        wont(f, "no Slurm (%s%s%s missing): the slurm launcher cannot be used; the local one can",
             f->sbatch ? "" : "sbatch", !f->sbatch && !f->srun ? ", " : "", f->srun ? "" : "srun");
    if (!f->confine_off && !f->confine_ok)
        wont(f,
             "confinement unavailable (%s): every evaluation ends as infra_error unless run "
             "with --no-confine",
             f->confine_what ? f->confine_what : "unknown reason");
    /* a local OpenAI-compatible server (vLLM, Ollama) needs no key */
    if (!f->key_anthropic && !f->key_openai && !f->base_url_openai)
        wont(f, "no LLM key or server (ANTHROPIC_API_KEY, OPENAI_API_KEY or a local "
                "CUCO_OPENAI_BASE_URL): LLM mutators and the LLM transform cannot run; the "
                "offline knob mutator can");
}

static void facts_gather(doctor_facts *f)
{
    memset(f, 0, sizeof *f);
    cuco_err e = CUCO_ERR_INIT;
    if (cuco_toolchain_detect(&f->tc, &e) != 0)
        cuco_err_clear(&e);
    f->nccl_device_api_usable =
        f->tc.nccl_device_api && f->tc.nccl_version >= DOCTOR_NCCL_DEVICE_API_MIN;
    detect_gpus(f);
    detect_rdma(f);
    detect_mpi(f);
    f->sbatch = cuco_which("sbatch");
    f->srun = cuco_which("srun");
    f->key_anthropic = env_set_nonempty("ANTHROPIC_API_KEY");
    f->key_openai = env_set_nonempty("OPENAI_API_KEY");
    f->base_url_openai = env_set_nonempty("CUCO_OPENAI_BASE_URL");
    f->base_url_anthropic = env_set_nonempty("CUCO_ANTHROPIC_BASE_URL");
    f->confine_off = !cuco_confine_default_enabled();
    f->confine_ok = cuco_confine_probe(&f->confine_what) == 0;
    judge(f);
}

static void facts_free(doctor_facts *f)
{
    free(f->nvidia_smi);
    free(f->gpu_problem);
    for (size_t i = 0; i < f->n_gpus; i++) {
        free(f->gpus[i].name);
        free(f->gpus[i].compute_cap);
    }
    free(f->gpus);
    for (size_t i = 0; i < f->n_links; i++) {
        free(f->links[i].kind);
        free(f->links[i].p2p);
    }
    free(f->links);
    cuco_toolchain_free(&f->tc);
    free(f->mpirun_version);
    free(f->mpicxx);
    for (size_t i = 0; i < f->n_rdma; i++)
        free(f->rdma[i]);
    free(f->rdma);
    free(f->sbatch);
    free(f->srun);
    free(f->confine_what);
    for (size_t i = 0; i < f->n_wont; i++)
        free(f->wont[i]);
    free(f->wont);
}

#if defined(__clang__)
#define DOCTOR_COMPILER __VERSION__
#elif defined(__GNUC__)
#define DOCTOR_COMPILER "gcc " __VERSION__
#else
#define DOCTOR_COMPILER "unknown compiler"
#endif

/* "0.8.1" from XXH_versionNumber()'s major*10000+minor*100+release; caller frees. */
static char *xxhash_version(void)
{
    unsigned v = XXH_versionNumber();
    return cuco_sprintf("%u.%u.%u", v / 10000, (v / 100) % 100, v % 100);
}

static const char *sanitizers(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return "address,undefined";
#else
    return "none";
#endif
}

static const char *link_meaning(const char *kind)
{
    if (is_numbered(kind, "NV"))
        return "NVLink";
    if (!strcmp(kind, "PIX"))
        return "PCIe, one bridge";
    if (!strcmp(kind, "PXB"))
        return "PCIe, several bridges";
    if (!strcmp(kind, "PHB"))
        return "PCIe through the host bridge";
    if (!strcmp(kind, "NODE"))
        return "PCIe across host bridges of one NUMA node";
    if (!strcmp(kind, "SYS"))
        return "PCIe across NUMA nodes";
    return "unknown";
}

static const char *or_none(const char *s)
{
    return s ? s : "not found";
}

/* "namespaces" (in force), "off" (CUCO_CONFINE=0) or "unavailable". */
static const char *confine_mode(const doctor_facts *f)
{
    return f->confine_off ? "off" : f->confine_ok ? "namespaces" : "unavailable";
}

static void print_confine(const doctor_facts *f)
{
    printf("\nConfinement of builds and runs\n");
    if (f->confine_off)
        printf("  off (CUCO_CONFINE=0): candidates run unconfined%s\n",
               f->confine_ok ? "; namespaces would work here" : "");
    else if (f->confine_ok)
        printf("  in force: %s\n", or_none(f->confine_what));
    else
        printf("  unavailable: %s\n", or_none(f->confine_what));
}

static void print_text(const doctor_facts *f)
{
    const cuco_toolchain *tc = &f->tc;
    printf("cuco %s doctor\n\n", CUCO_VERSION);

    printf("Build\n");
    char *xxh = xxhash_version();
    printf("  libcuco %s, compiled by %s, sanitizers: %s\n", CUCO_VERSION, DOCTOR_COMPILER,
           sanitizers());
    printf(
        "  libraries: jansson %s, SQLite %s, libyaml %s, libcurl %s, libmicrohttpd %s, xxhash %s\n",
        jansson_version_str(), sqlite3_libversion(), yaml_get_version_string(),
        curl_version_info(CURLVERSION_NOW)->version, MHD_get_version(), xxh ? xxh : "?");
    free(xxh);

    printf("\nGPUs\n");
    if (f->n_gpus == 0) {
        printf("  none: %s\n", f->gpu_problem);
    } else {
        printf("  %zu GPU%s (nvidia-smi: %s)\n", f->n_gpus, f->n_gpus == 1 ? "" : "s",
               f->nvidia_smi);
        for (size_t i = 0; i < f->n_gpus; i++) {
            const doctor_gpu *g = &f->gpus[i];
            printf("  GPU%d  %s", g->index, g->name);
            if (g->memory_mib >= 0)
                printf(", %ld MiB", g->memory_mib);
            if (g->compute_cap)
                printf(", compute capability %s", g->compute_cap);
            if (g->sm_count)
                printf(", %d SMs (known for this model)", g->sm_count);
            else
                printf(", SM count unknown");
            printf("\n");
        }
        for (size_t i = 0; i < f->n_links; i++) {
            const doctor_link *l = &f->links[i];
            printf("  GPU%d-GPU%d  %s (%s", l->a, l->b, l->kind, link_meaning(l->kind));
            if (l->nvlinks)
                printf(", %d links", l->nvlinks);
            printf("), P2P %s\n", l->p2p ? l->p2p : "unknown");
        }
    }

    printf("\nCUDA\n");
    printf("  toolkit  %s\n", or_none(tc->cuda_home));
    printf("  nvcc     %s", or_none(tc->nvcc));
    if (tc->nvcc_version)
        printf(" (release %s)", tc->nvcc_version);
    printf("\n");

    printf("\nNCCL\n");
    if (!tc->nccl_include) {
        printf("  not found (NCCL_HOME, CUDA toolkit, system paths)\n");
    } else {
        char *hv = cuco_nccl_version_string(tc->nccl_version);
        char *lv = cuco_nccl_version_string(tc->nccl_lib_version);
        printf("  version   %s (from %s)\n", hv, tc->nccl_source);
        printf("  headers   %s\n", tc->nccl_include);
        if (tc->nccl_lib)
            printf("  library   %s/libnccl.so.2 (version %s)\n", tc->nccl_lib, lv);
        else
            printf("  library   libnccl.so.2 not found\n");
        printf("  device API (nccl_device.h): %s\n", f->nccl_device_api_usable ? "yes"
                                                     : tc->nccl_device_api
                                                         ? "present but NCCL < 2.28"
                                                         : "no");
        printf("  GIN headers (nccl_device/gin.h): %s\n", tc->nccl_gin ? "yes" : "no");
        free(hv);
        free(lv);
    }
    printf("  RDMA NICs (for GIN): ");
    if (f->n_rdma == 0)
        printf("none\n");
    for (size_t i = 0; i < f->n_rdma; i++)
        printf("%s%s", f->rdma[i], i + 1 < f->n_rdma ? ", " : "\n");

    printf("\nMPI\n");
    printf("  mpirun   %s", or_none(tc->mpirun));
    if (f->mpirun_version)
        printf(" (%s)", f->mpirun_version);
    printf("\n  mpicc    %s\n  mpicxx   %s\n", or_none(tc->mpicc), or_none(f->mpicxx));

    printf("\nSlurm\n");
    printf("  sbatch   %s\n  srun     %s\n", or_none(f->sbatch), or_none(f->srun));

    print_confine(f);

    printf("\nLLM keys (names only)\n");
    printf("  ANTHROPIC_API_KEY   %s\n", f->key_anthropic ? "set" : "not set");
    printf("  OPENAI_API_KEY      %s\n", f->key_openai ? "set" : "not set");
    printf("  CUCO_OPENAI_BASE_URL     %s\n", f->base_url_openai ? "set" : "not set");
    printf("  CUCO_ANTHROPIC_BASE_URL  %s\n", f->base_url_anthropic ? "set" : "not set");

    printf("\nWhat will not work here:\n");
    if (f->n_wont == 0)
        printf("  nothing found missing\n");
    for (size_t i = 0; i < f->n_wont; i++)
        printf("  - %s\n", f->wont[i]);
}

static json_t *json_str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *facts_json(const doctor_facts *f)
{
    const cuco_toolchain *tc = &f->tc;
    json_t *root = json_object();

    char *xxh = xxhash_version();
    json_object_set_new(
        root, "cuco",
        json_pack("{s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}}", "version", CUCO_VERSION,
                  "compiler", DOCTOR_COMPILER, "sanitizers", sanitizers(), "libraries", "jansson",
                  jansson_version_str(), "sqlite", sqlite3_libversion(), "libyaml",
                  yaml_get_version_string(), "libcurl", curl_version_info(CURLVERSION_NOW)->version,
                  "libmicrohttpd", MHD_get_version(), "xxhash", xxh ? xxh : "?"));
    free(xxh);

    json_t *gpus = json_object();
    json_object_set_new(gpus, "count", json_integer((json_int_t)f->n_gpus));
    json_object_set_new(gpus, "nvidia_smi", json_str_or_null(f->nvidia_smi));
    json_object_set_new(gpus, "problem", json_str_or_null(f->gpu_problem));
    json_t *devices = json_array();
    for (size_t i = 0; i < f->n_gpus; i++) {
        const doctor_gpu *g = &f->gpus[i];
        json_t *d = json_object();
        json_object_set_new(d, "index", json_integer(g->index));
        json_object_set_new(d, "name", json_string(g->name ? g->name : ""));
        json_object_set_new(d, "memory_mib",
                            g->memory_mib >= 0 ? json_integer(g->memory_mib) : json_null());
        json_object_set_new(d, "compute_capability", json_str_or_null(g->compute_cap));
        json_object_set_new(d, "sm_count", g->sm_count ? json_integer(g->sm_count) : json_null());
        json_object_set_new(d, "sm_count_source", g->sm_count ? json_string("model") : json_null());
        json_array_append_new(devices, d);
    }
    json_object_set_new(gpus, "devices", devices);
    json_t *links = json_array();
    for (size_t i = 0; i < f->n_links; i++) {
        const doctor_link *l = &f->links[i];
        json_array_append_new(links,
                              json_pack("{s:i, s:i, s:s, s:s, s:i, s:o}", "a", l->a, "b", l->b,
                                        "link", l->kind, "meaning", link_meaning(l->kind),
                                        "nvlinks", l->nvlinks, "p2p", json_str_or_null(l->p2p)));
    }
    json_object_set_new(gpus, "links", links);
    json_object_set_new(root, "gpus", gpus);

    json_object_set_new(root, "cuda",
                        json_pack("{s:o, s:o, s:o}", "home", json_str_or_null(tc->cuda_home),
                                  "nvcc", json_str_or_null(tc->nvcc), "nvcc_version",
                                  json_str_or_null(tc->nvcc_version)));

    json_t *nccl = json_object();
    json_object_set_new(nccl, "found", json_boolean(tc->nccl_include != NULL));
    char *hv = tc->nccl_version ? cuco_nccl_version_string(tc->nccl_version) : NULL;
    char *lv = tc->nccl_lib_version ? cuco_nccl_version_string(tc->nccl_lib_version) : NULL;
    json_object_set_new(nccl, "version", json_str_or_null(hv));
    json_object_set_new(nccl, "version_code", json_integer(tc->nccl_version));
    json_object_set_new(nccl, "source", json_str_or_null(tc->nccl_source));
    json_object_set_new(nccl, "include", json_str_or_null(tc->nccl_include));
    json_object_set_new(nccl, "lib", json_str_or_null(tc->nccl_lib));
    json_object_set_new(nccl, "lib_version", json_str_or_null(lv));
    json_object_set_new(nccl, "device_api_headers", json_boolean(tc->nccl_device_api));
    json_object_set_new(nccl, "device_api_usable", json_boolean(f->nccl_device_api_usable));
    json_object_set_new(nccl, "gin_headers", json_boolean(tc->nccl_gin));
    free(hv);
    free(lv);
    json_object_set_new(root, "nccl", nccl);

    json_t *rdma = json_array();
    for (size_t i = 0; i < f->n_rdma; i++)
        json_array_append_new(rdma, json_string(f->rdma[i]));
    json_object_set_new(root, "rdma_nics", rdma);

    json_object_set_new(root, "mpi",
                        json_pack("{s:o, s:o, s:o, s:o}", "mpirun", json_str_or_null(tc->mpirun),
                                  "mpirun_version", json_str_or_null(f->mpirun_version), "mpicc",
                                  json_str_or_null(tc->mpicc), "mpicxx",
                                  json_str_or_null(f->mpicxx)));
    json_object_set_new(root, "slurm",
                        json_pack("{s:o, s:o}", "sbatch", json_str_or_null(f->sbatch), "srun",
                                  json_str_or_null(f->srun)));
    json_object_set_new(root, "llm_keys",
                        json_pack("{s:b, s:b, s:b, s:b}", "ANTHROPIC_API_KEY", f->key_anthropic,
                                  "OPENAI_API_KEY", f->key_openai, "CUCO_OPENAI_BASE_URL",
                                  f->base_url_openai, "CUCO_ANTHROPIC_BASE_URL",
                                  f->base_url_anthropic));
    json_object_set_new(root, "confinement",
                        json_pack("{s:s, s:b, s:o}", "mode", confine_mode(f), "in_force",
                                  !f->confine_off && f->confine_ok, "detail",
                                  json_str_or_null(f->confine_what)));
    json_t *wont_list = json_array();
    for (size_t i = 0; i < f->n_wont; i++)
        json_array_append_new(wont_list, json_string(f->wont[i]));
    json_object_set_new(root, "will_not_work", wont_list);
    return root;
}

int cmd_doctor(int argc, char **argv)
{
    int as_json = 0;
    const cli_option options[] = {
        CLI_OPT_FLAG("json", 0, &as_json, "print one JSON object with the same facts"),
        CLI_OPT_END};
    cli_args args;
    int rc = cli_parse(&doctor_command, options, argc, argv, &args);
    if (rc != CLI_CONTINUE)
        return rc;
    cli_args_free(&args);

    doctor_facts facts;
    facts_gather(&facts);
    rc = CLI_EXIT_OK;
    if (as_json) {
        json_t *root = facts_json(&facts);
        char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (text) {
            printf("%s\n", text);
            free(text);
        } else {
            fprintf(stderr, "cuco doctor: cannot build the JSON output\n");
            rc = 1;
        }
        json_decref(root);
    } else {
        print_text(&facts);
    }
    facts_free(&facts);
    return rc;
}
