/* cuco_timeline.c: a CUPTI injection library that records the kernel
 * timeline of any CUDA program without touching its source.
 *
 * Loaded by the CUDA driver through CUDA_INJECTION64_PATH, which calls the
 * exported InitializeInjection() once per process. It enables the Activity
 * API for concurrent kernels, memcpys (host/device and peer to peer) and
 * memsets, and at exit (atexit + cuptiActivityFlushAll) writes one JSON
 * object per line to $CUCO_TIMELINE_DIR/timeline.<pid>.jsonl:
 *
 *   {"type":"process","pid":..,"rank":..,"local_rank":..,"hostname":".."}
 *   {"type":"kernel","name":"..","start":ns,"end":ns,"device":0,"stream":7,
 *    "correlation":123,"grid":[x,y,z],"block":[x,y,z]}
 *   {"type":"memcpy","kind":"HtoD"|"DtoH"|"DtoD"|"PtoP"|..,"bytes":..,
 *    "start":..,"end":..,"device":..,"stream":..,"correlation":..,
 *    "src_device":..,"dst_device":..}
 *   {"type":"memset","bytes":..,"start":..,"end":..,"device":..,"stream":..,
 *    "correlation":..}
 *   {"type":"timed","start_correlation":..,"end_correlation":..,"ms":..,
 *    "device":..}
 *   {"type":"summary","records":..,"dropped":..,"timed":..}
 *
 * A "timed" record is one cudaEventElapsedTime(&ms, start, end) call of the
 * program: the correlation ids of the cudaEventRecord calls that last
 * recorded start and end, so that the kernels the program itself timed are
 * those launched between them (correlation ids grow with every API call of
 * the process), and the ms the program got. Runtime API callbacks on
 * cudaEventRecord* and cudaEventElapsedTime only; nothing else is hooked.
 *
 * Timestamps are CUPTI's (ns, one clock per host). One process may drive
 * several GPUs: every record carries its device. The rank comes from the MPI
 * launcher's environment (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID) or
 * is -1. Records are kept in memory (a growable array of lines) and written
 * once, so that the profiled program's timing is disturbed as little as
 * possible. */
#include <cuda_runtime_api.h>
#include <cupti.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TL_BUFFER_BYTES (8u << 20)
#define TL_BUFFER_ALIGN 8u

static char *tl_text; /* accumulated JSON lines (owned) */
static size_t tl_len, tl_cap;
static unsigned long long tl_records, tl_dropped;
static int tl_started;
static unsigned long long tl_timed;
/* Callbacks come from the program's threads, buffers from CUPTI's: one lock
 * for the text and the event table. */
static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;

/* The correlation id of the last cudaEventRecord of each event. */
typedef struct tl_event {
    uintptr_t event;
    uint32_t correlation;
} tl_event;
static tl_event *tl_events;
static size_t tl_n_events, tl_cap_events;

/* Parameters of cudaEventRecord* and cudaEventElapsedTime (every version has
 * these first fields in this order). */
typedef struct tl_record_params {
    cudaEvent_t event;
    cudaStream_t stream;
} tl_record_params;
typedef struct tl_elapsed_params {
    float *ms;
    cudaEvent_t start;
    cudaEvent_t end;
} tl_elapsed_params;

static void tl_append(const char *s, size_t n)
{
    if (tl_len + n + 1 > tl_cap) {
        size_t cap = tl_cap ? tl_cap : (1u << 20);
        while (cap < tl_len + n + 1)
            cap *= 2;
        char *grown = realloc(tl_text, cap);
        if (!grown) {
            tl_dropped++;
            return;
        }
        tl_text = grown;
        tl_cap = cap;
    }
    memcpy(tl_text + tl_len, s, n);
    tl_len += n;
    tl_text[tl_len] = '\0';
}

/* Appends s as a JSON string (quoted, escaped). */
static void tl_append_json_string(const char *s)
{
    tl_append("\"", 1);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        char esc[8];
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            tl_append(esc, 2);
        } else if (*p < 0x20) {
            int n = snprintf(esc, sizeof esc, "\\u%04x", *p);
            tl_append(esc, (size_t)n);
        } else {
            tl_append((const char *)p, 1);
        }
    }
    tl_append("\"", 1);
}

static void tl_appendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void tl_appendf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    char *line = malloc((size_t)n + 1);
    if (!line) {
        tl_dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(line, (size_t)n + 1, fmt, ap);
    va_end(ap);
    tl_append(line, (size_t)n);
    free(line);
}

static const char *tl_copy_kind(uint8_t kind)
{
    switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
        return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
        return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
        return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
        return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
        return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
        return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
        return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
        return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
        return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
        return "PtoP";
    default:
        return "unknown";
    }
}

static void tl_record(const CUpti_Activity *rec)
{
    tl_records++;
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        tl_append("{\"type\":\"kernel\",\"name\":", 24);
        tl_append_json_string(k->name);
        tl_appendf(",\"start\":%llu,\"end\":%llu,\"device\":%u,\"stream\":%u,\"correlation\":%u,"
                   "\"grid\":[%d,%d,%d],\"block\":[%d,%d,%d]}\n",
                   (unsigned long long)k->start, (unsigned long long)k->end, k->deviceId,
                   k->streamId, k->correlationId, k->gridX, k->gridY, k->gridZ, k->blockX,
                   k->blockY, k->blockZ);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        tl_appendf(
            "{\"type\":\"memcpy\",\"kind\":\"%s\",\"bytes\":%llu,\"start\":%llu,\"end\":%llu,"
            "\"device\":%u,\"stream\":%u,\"correlation\":%u}\n",
            tl_copy_kind(m->copyKind), (unsigned long long)m->bytes, (unsigned long long)m->start,
            (unsigned long long)m->end, m->deviceId, m->streamId, m->correlationId);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)rec;
        tl_appendf(
            "{\"type\":\"memcpy\",\"kind\":\"%s\",\"bytes\":%llu,\"start\":%llu,\"end\":%llu,"
            "\"device\":%u,\"stream\":%u,\"correlation\":%u,\"src_device\":%u,"
            "\"dst_device\":%u}\n",
            tl_copy_kind(m->copyKind), (unsigned long long)m->bytes, (unsigned long long)m->start,
            (unsigned long long)m->end, m->deviceId, m->streamId, m->correlationId, m->srcDeviceId,
            m->dstDeviceId);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        tl_appendf("{\"type\":\"memset\",\"bytes\":%llu,\"start\":%llu,\"end\":%llu,\"device\":%u,"
                   "\"stream\":%u,\"correlation\":%u}\n",
                   (unsigned long long)m->bytes, (unsigned long long)m->start,
                   (unsigned long long)m->end, m->deviceId, m->streamId, m->correlationId);
        break;
    }
    default:
        tl_records--;
        break;
    }
}

static void CUPTIAPI tl_buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    void *p = NULL;
    if (posix_memalign(&p, TL_BUFFER_ALIGN, TL_BUFFER_BYTES) != 0)
        p = NULL;
    *buffer = p;
    *size = p ? TL_BUFFER_BYTES : 0;
    *max_records = 0;
}

static void tl_event_recorded(uintptr_t event, uint32_t correlation)
{
    for (size_t i = 0; i < tl_n_events; i++)
        if (tl_events[i].event == event) {
            tl_events[i].correlation = correlation;
            return;
        }
    if (tl_n_events == tl_cap_events) {
        size_t cap = tl_cap_events ? tl_cap_events * 2 : 64;
        tl_event *grown = realloc(tl_events, cap * sizeof *grown);
        if (!grown)
            return;
        tl_events = grown;
        tl_cap_events = cap;
    }
    tl_events[tl_n_events++] = (tl_event){event, correlation};
}

static int tl_event_correlation(uintptr_t event, uint32_t *correlation)
{
    for (size_t i = 0; i < tl_n_events; i++)
        if (tl_events[i].event == event) {
            *correlation = tl_events[i].correlation;
            return 1;
        }
    return 0;
}

static void CUPTIAPI tl_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)userdata;
    const CUpti_CallbackData *cb = data;
    if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || !cb)
        return;
    switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010: {
        const tl_record_params *p = cb->functionParams;
        if (cb->callbackSite == CUPTI_API_ENTER && p) {
            pthread_mutex_lock(&tl_lock);
            tl_event_recorded((uintptr_t)p->event, cb->correlationId);
            pthread_mutex_unlock(&tl_lock);
        }
        break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v3020:
    case CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080: {
        const tl_elapsed_params *p = cb->functionParams;
        if (cb->callbackSite != CUPTI_API_EXIT || !p || !p->ms)
            break;
        const cudaError_t *ret = cb->functionReturnValue;
        if (ret && *ret != cudaSuccess)
            break;
        uint32_t device = 0;
        if (!cb->context || cuptiGetDeviceId(cb->context, &device) != CUPTI_SUCCESS)
            device = UINT32_MAX;
        pthread_mutex_lock(&tl_lock);
        uint32_t a = 0, b = 0;
        if (tl_event_correlation((uintptr_t)p->start, &a) &&
            tl_event_correlation((uintptr_t)p->end, &b) && a < b) {
            tl_appendf("{\"type\":\"timed\",\"start_correlation\":%u,\"end_correlation\":%u,"
                       "\"ms\":%.6f,\"device\":%d}\n",
                       a, b, (double)*p->ms, device == UINT32_MAX ? -1 : (int)device);
            tl_timed++;
        }
        pthread_mutex_unlock(&tl_lock);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI tl_buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer,
                                         size_t size, size_t valid)
{
    (void)ctx;
    (void)stream_id;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&tl_lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        tl_record(rec);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &dropped) == CUPTI_SUCCESS)
        tl_dropped += dropped;
    pthread_mutex_unlock(&tl_lock);
    free(buffer);
}

static const char *tl_env_rank(const char *const *names)
{
    for (size_t i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return "-1";
}

static void tl_write(void)
{
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    pthread_mutex_lock(&tl_lock);
    const char *dir = getenv("CUCO_TIMELINE_DIR");
    if (!dir || !*dir)
        dir = ".";
    size_t need = strlen(dir) + 64;
    char *path = malloc(need), *tmp = malloc(need + 8);
    if (!path || !tmp) {
        free(path);
        free(tmp);
        pthread_mutex_unlock(&tl_lock);
        return;
    }
    snprintf(path, need, "%s/timeline.%ld.jsonl", dir, (long)getpid());
    snprintf(tmp, need + 8, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "cuco_timeline: cannot write %s\n", tmp);
        free(path);
        free(tmp);
        pthread_mutex_unlock(&tl_lock);
        return;
    }
    static const char *const ranks[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK",
                                        "SLURM_PROCID", NULL};
    static const char *const locals[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                         "SLURM_LOCALID", NULL};
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    fprintf(f, "{\"type\":\"process\",\"pid\":%ld,\"rank\":%ld,\"local_rank\":%ld,\"hostname\":",
            (long)getpid(), strtol(tl_env_rank(ranks), NULL, 10),
            strtol(tl_env_rank(locals), NULL, 10));
    size_t before = tl_len;
    tl_append_json_string(host);
    fwrite(tl_text + before, 1, tl_len - before, f);
    tl_len = before;
    fputs("}\n", f);
    if (tl_text)
        fwrite(tl_text, 1, tl_len, f);
    fprintf(f, "{\"type\":\"summary\",\"records\":%llu,\"dropped\":%llu,\"timed\":%llu}\n",
            tl_records, tl_dropped, tl_timed);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, "cuco_timeline: cannot write %s\n", path);
    free(path);
    free(tmp);
    free(tl_text);
    tl_text = NULL;
    tl_len = tl_cap = 0;
    pthread_mutex_unlock(&tl_lock);
}

static int tl_enable(CUpti_ActivityKind kind)
{
    CUptiResult r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
        const char *msg = NULL;
        cuptiGetResultString(r, &msg);
        fprintf(stderr, "cuco_timeline: cannot enable activity kind %d: %s\n", (int)kind,
                msg ? msg : "?");
        return -1;
    }
    return 0;
}

/* Called by the CUDA driver when it loads this library. Returns 1 on success. */
__attribute__((visibility("default"))) int InitializeInjection(void)
{
    if (tl_started)
        return 1;
    tl_started = 1;
    if (cuptiActivityRegisterCallbacks(tl_buffer_requested, tl_buffer_completed) != CUPTI_SUCCESS) {
        fprintf(stderr, "cuco_timeline: cuptiActivityRegisterCallbacks failed\n");
        return 0;
    }
    if (tl_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL))
        return 0;
    tl_enable(CUPTI_ACTIVITY_KIND_MEMCPY);
    tl_enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
    tl_enable(CUPTI_ACTIVITY_KIND_MEMSET);
    /* The program's own timed intervals; the kernel timeline works without them. */
    CUpti_SubscriberHandle sub;
    if (cuptiSubscribe(&sub, tl_callback, NULL) == CUPTI_SUCCESS) {
        static const CUpti_CallbackId ids[] = {
            CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
            CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000,
            CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010,
            CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010,
            CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v3020,
            CUPTI_RUNTIME_TRACE_CBID_cudaEventElapsedTime_v12080};
        for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
            if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RUNTIME_API, ids[i]) != CUPTI_SUCCESS)
                fprintf(stderr, "cuco_timeline: cannot enable callback %u\n", (unsigned)ids[i]);
    } else {
        fprintf(stderr, "cuco_timeline: cuptiSubscribe failed: no timed intervals\n");
    }
    atexit(tl_write);
    return 1;
}
