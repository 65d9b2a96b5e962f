// harness.cuh: the frozen harness shared by cuco's GPU workloads.
//
// Every workload is an MPI program, one rank per GPU, that sets up NCCL from
// the host, runs its step, checks the result against an independent
// reference, and prints the three lines cuco reads:
//   Verification: PASS            (or "Verification: FAIL <reason>")
//   CUCO_RESULT {"time_ms":..., "iters":..., "compute_ms":..., "comm_ms":...}
//   CUCO_VOUCH <nonce> <fnv1a64 of the CUCO_RESULT json> PASS|FAIL
// Nothing here is inside an EVOLVE-BLOCK: candidates may not change it.
//
// The timed steps are verified steps (hx_time_checked_ms): before each, new
// inputs (a per-iteration seed) and poisoned outputs, written on the main
// stream behind a short delay, so that step work not ordered after the main
// stream reads stale inputs or has its outputs poisoned; each step is timed
// from a barrier to a device-wide synchronisation on a host clock (all
// streams), less the delay and the preparation as the main stream's events
// measured them; after each, a sample of its outputs is checked against that
// iteration's inputs and the process's threads are counted (a step may not
// leave host threads running). A step that does its work once, keeps an
// earlier result, runs on a stream the main stream never waits for or
// defers work to a host thread fails verification.
//
// The vouch: cuco sets CUCO_NONCE (32 hex digits); hx_init takes it out of
// the environment before anything else runs, and hx_finalize prints it, after
// the candidate's last code, with the hash of the result text and the
// verdict, so that a program that exits early or prints its own lines has no
// vouch that cuco accepts. The nonce, the result text and the verdict live in
// main's own hx_vouch (a local the EVOLVE-BLOCK cannot name), never in a
// global a block could read or rewrite.
#pragma once

#include <dirent.h>
#include <time.h>

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#define HX_CUDA(call)                                                                     \
    do {                                                                                  \
        cudaError_t hx_e = (call);                                                        \
        if (hx_e != cudaSuccess) {                                                        \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(hx_e),     \
                    __FILE__, __LINE__, #call);                                           \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                 \
        }                                                                                 \
    } while (0)

#define HX_NCCL(call)                                                                     \
    do {                                                                                  \
        ncclResult_t hx_r = (call);                                                       \
        if (hx_r != ncclSuccess) {                                                        \
            fprintf(stderr, "NCCL error %s at %s:%d: %s\n", ncclGetErrorString(hx_r),     \
                    __FILE__, __LINE__, #call);                                           \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                 \
        }                                                                                 \
    } while (0)

#define HX_CHECK_LAUNCH() HX_CUDA(cudaGetLastError())

struct hx_ctx {
    int rank = 0, nranks = 1, local_rank = 0, device = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;      // main stream
    cudaStream_t comm_stream = nullptr; // second stream, free for overlap strategies
};

// What hx_finalize vouches for: the nonce taken from the environment, the
// CUCO_RESULT json text and the verdict printed (empty: none printed, which
// is vouched as FAIL; a FAIL once printed stays). One per run, a local of
// main. The nonce is kept masked with random bytes (never as its hex text in
// memory), so that a step scanning the process for it finds nothing to copy.
struct hx_vouch {
    unsigned char masked[64] = {};
    unsigned char key[64] = {};
    size_t nonce_len = 0; // 0: no nonce
    std::string result_json;
    std::string verdict;
};

// FNV-1a, 64 bits, of the text.
inline uint64_t hx_fnv1a64(const std::string &text)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : text) {
        h ^= ch;
        h *= 0x100000001b3ull;
    }
    return h;
}

// CUCO_NONCE, read and removed before MPI, NCCL or the step see the
// environment (its value overwritten in place too: /proc/self/environ shows
// the process's first copy); anything but 1 to 64 hex digits counts as no
// nonce.
inline void hx_take_nonce(hx_vouch &v)
{
    char *env = getenv("CUCO_NONCE");
    size_t n = env ? strlen(env) : 0;
    bool hex = n > 0 && n <= sizeof v.masked;
    for (size_t i = 0; hex && i < n; i++)
        hex = strchr("0123456789abcdefABCDEF", env[i]) != nullptr;
    FILE *random = hex ? fopen("/dev/urandom", "rb") : nullptr;
    if (random && fread(v.key, 1, n, random) == n) {
        for (size_t i = 0; i < n; i++)
            v.masked[i] = (unsigned char)env[i] ^ v.key[i];
        v.nonce_len = n;
    }
    if (random)
        fclose(random);
    if (env)
        memset(env, 'x', n);
    unsetenv("CUCO_NONCE");
}

// The nonce's text, unmasked only to be printed ("none" without one).
inline std::string hx_nonce_text(const hx_vouch &v)
{
    std::string text = v.nonce_len ? "" : "none";
    for (size_t i = 0; i < v.nonce_len; i++)
        text += (char)(v.masked[i] ^ v.key[i]);
    return text;
}

// MPI + device selection + NCCL communicator. Ranks map to local GPUs by
// their rank on the node, so launching node-major keeps NVLink peers together.
inline void hx_init(int *argc, char ***argv, hx_ctx &c, hx_vouch &v)
{
    hx_take_nonce(v);
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.nranks);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &c.local_rank);
    MPI_Comm_free(&node);
    int ndev = 0;
    HX_CUDA(cudaGetDeviceCount(&ndev));
    if (ndev == 0) {
        fprintf(stderr, "no CUDA device visible to rank %d\n", c.rank);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    c.device = c.local_rank % ndev;
    HX_CUDA(cudaSetDevice(c.device));
    ncclUniqueId id;
    if (c.rank == 0)
        HX_NCCL(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    HX_NCCL(ncclCommInitRank(&c.comm, c.nranks, id, c.rank));
    HX_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
    HX_CUDA(cudaStreamCreateWithFlags(&c.comm_stream, cudaStreamNonBlocking));
}

inline void hx_finalize(hx_ctx &c, const hx_vouch &v)
{
    HX_CUDA(cudaStreamSynchronize(c.stream));
    HX_CUDA(cudaStreamSynchronize(c.comm_stream));
    HX_CUDA(cudaStreamDestroy(c.stream));
    HX_CUDA(cudaStreamDestroy(c.comm_stream));
    HX_NCCL(ncclCommDestroy(c.comm));
    MPI_Finalize();
    if (c.rank == 0) {
        printf("CUCO_VOUCH %s %016llx %s\n", hx_nonce_text(v).c_str(),
               (unsigned long long)hx_fnv1a64(v.result_json),
               v.verdict.empty() ? "FAIL" : v.verdict.c_str());
        fflush(stdout);
    }
}

// Integer option "--name value" with a default.
inline long hx_arg_long(int argc, char **argv, const char *name, long def)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atol(argv[i + 1]);
    return def;
}

inline bool hx_arg_flag(int argc, char **argv, const char *name)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], name))
            return true;
    return false;
}

// Least warm-up time before timing, in ms ($CUCO_MIN_WARMUP_MS overrides;
// 0: count only). A fixed count of warm-up steps is not enough: on an H100,
// gemm_allgather's 5.5 ms step after 5 warm-up steps varied by 11% from one
// process to the next (5.19 to 5.81 ms, six processes), after 50 steps (about
// 280 ms) by 0.3% (5.476 to 5.490 ms).
inline double hx_min_warmup_ms()
{
    const char *v = getenv("CUCO_MIN_WARMUP_MS");
    return v && *v ? atof(v) : 300.0;
}

// Runs step() at least `warmup` times and for at least hx_min_warmup_ms() of
// wall time on the slowest rank. Ranks agree after each batch (MPI), so all
// run the same number of steps (steps hold collectives). Capped at 100000
// steps.
inline void hx_warm_up(cudaStream_t s, int warmup, const std::function<void()> &step)
{
    const double min_ms = hx_min_warmup_ms();
    if (warmup <= 0 && min_ms <= 0)
        return;
    const double t0 = MPI_Wtime();
    long done = 0;
    long batch = warmup > 0 ? warmup : 1;
    for (;;) {
        for (long i = 0; i < batch; i++, done++)
            step();
        HX_CUDA(cudaStreamSynchronize(s));
        HX_CUDA(cudaDeviceSynchronize());
        double elapsed = (MPI_Wtime() - t0) * 1e3, slowest = 0;
        MPI_Allreduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if ((done >= warmup && slowest >= min_ms) || done >= 100000)
            break;
        // the next batch: about what the time left needs (every rank computes
        // the same number from the same slowest time), 1 to 10001 steps; the
        // first batch was the `warmup` steps, so only the time is left
        double per_step = slowest / (double)done;
        double left = min_ms - slowest;
        batch = per_step > 0 ? (long)std::min(10000.0, left / per_step) + 1 : 1;
    }
}

// Milliseconds on a steady host clock.
inline double hx_now_ms()
{
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// The process's threads (/proc/self/task entries); -1 if unreadable.
inline int hx_thread_count()
{
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return -1;
    int n = 0;
    while (struct dirent *e = readdir(dir))
        if (e->d_name[0] != '.')
            n++;
    closedir(dir);
    return n;
}

// The thread count once it holds still: read every 20 ms until two reads
// agree (at most 0.5 s), so that threads a warm-up step started and that end
// by themselves soon after are not counted.
inline int hx_settled_thread_count()
{
    int last = hx_thread_count();
    for (int i = 0; i < 25; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, nullptr);
        int now = hx_thread_count();
        if (now == last)
            break;
        last = now;
    }
    return last;
}

// A per-iteration seed: iteration i's inputs differ from the verification
// step's and from every other iteration's.
inline uint64_t hx_iter_seed(uint64_t seed, int iter)
{
    return seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(iter + 1));
}

inline double hx_median(std::vector<double> times)
{
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// A verified step: prepare(i, st) writes iteration i's inputs (hx_iter_seed)
// and poisons the outputs, all on stream st; run() is the step; check(i, why)
// compares a sample of the outputs with a reference from iteration i's inputs
// (false and a reason on a mismatch).
struct hx_checked_step {
    std::function<void(int, cudaStream_t)> prepare;
    std::function<void()> run;
    std::function<bool(int, std::string &)> check;
};

// Spins one thread for `ns` nanoseconds of the GPU's global timer.
__global__ void hx_delay_kernel(unsigned long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
}

// The delay before each timed step's preparation: longer than enqueuing a
// step takes on the host, so that step work the main stream does not order
// runs before the new inputs and the poison.
#define HX_PREPARE_DELAY_NS 200000ull

// The ranks meet on the device: a one-int all-reduce on stream st, so that
// work after it on st starts on every rank once every rank's earlier work on
// its own stream is done.
inline void hx_device_barrier(hx_ctx &c, cudaStream_t st)
{
    static int *word = nullptr;
    if (!word)
        HX_CUDA(cudaMalloc(&word, sizeof(int)));
    HX_NCCL(ncclAllReduce(word, word, 1, ncclInt32, ncclSum, c.comm, st));
}

// One verified step: the delay, prepare(iter) and a device barrier on
// c.stream, then the step, timed from the host barrier to a device-wide
// synchronisation, less the delay, the preparation and the device barrier
// (events on c.stream around them). The device barrier makes every rank's
// step start after the slowest rank's preparation, so that no rank counts
// waiting for another rank to prepare (kv_transfer: only the prefill rank
// writes a new prompt). The slowest rank's ms.
inline double hx_time_prepared_step(hx_ctx &c, const hx_checked_step &st, int iter,
                                    cudaEvent_t prep0, cudaEvent_t prep1)
{
    HX_CUDA(cudaDeviceSynchronize());
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = hx_now_ms();
    HX_CUDA(cudaEventRecord(prep0, c.stream));
    hx_delay_kernel<<<1, 1, 0, c.stream>>>(HX_PREPARE_DELAY_NS);
    HX_CHECK_LAUNCH();
    st.prepare(iter, c.stream);
    hx_device_barrier(c, c.stream);
    HX_CUDA(cudaEventRecord(prep1, c.stream));
    st.run();
    HX_CUDA(cudaDeviceSynchronize());
    const double t1 = hx_now_ms();
    float prep_ms = 0;
    HX_CUDA(cudaEventElapsedTime(&prep_ms, prep0, prep1));
    double local = t1 - t0 - prep_ms, worst = 0;
    MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
}

// Times st.run() as hx_time_ms does, each timed step a verified one
// (hx_time_prepared_step); the checks stay outside the timed interval. ok
// turns false, and reason says "timed step i: ..." for the first failure on
// this rank, when a check fails or a step leaves more host threads than
// there were after the warm-up (hx_settled_thread_count).
inline double hx_time_checked_ms(hx_ctx &c, int warmup, int iters, const hx_checked_step &st,
                                 bool &ok, std::string &reason)
{
    hx_warm_up(c.stream, warmup, st.run);
    HX_CUDA(cudaDeviceSynchronize());
    const int threads_before = hx_settled_thread_count();
    cudaEvent_t prep0, prep1;
    HX_CUDA(cudaEventCreate(&prep0));
    HX_CUDA(cudaEventCreate(&prep1));
    std::vector<double> times;
    for (int i = 0; i < iters; i++) {
        times.push_back(hx_time_prepared_step(c, st, i, prep0, prep1));
        std::string why;
        int threads = hx_thread_count();
        if (threads > threads_before)
            why = "the step left " + std::to_string(threads - threads_before) +
                  " host threads running";
        else if (!st.check(i, why) && why.empty())
            why = "outputs wrong";
        if (!why.empty() && ok) {
            ok = false;
            reason = "timed step " + std::to_string(i) + ": " + why;
        }
    }
    HX_CUDA(cudaEventDestroy(prep0));
    HX_CUDA(cudaEventDestroy(prep1));
    return hx_median(times);
}

// A quick breakdown ($CUCO_BREAKDOWN=quick, which cuco sets for a search's
// candidates): the compute-only and comm-only parts are timed over one step
// each, without warm-up. The figures are rough; the program's own time (the
// verified steps) is timed as always. The run's result says so
// ("breakdown":"quick").
inline bool hx_breakdown_quick()
{
    const char *v = getenv("CUCO_BREAKDOWN");
    return v && !strcmp(v, "quick");
}

// Times step() for a breakdown (no inputs changed, nothing checked): a
// warm-up (hx_warm_up), then iters steps timed as the verified ones are
// (hx_time_prepared_step, with nothing to prepare). Returns the median over
// iterations of the slowest rank's time. A quick breakdown: one step, no
// warm-up.
inline double hx_time_ms(hx_ctx &c, cudaStream_t s, int warmup, int iters,
                         const std::function<void()> &step)
{
    if (hx_breakdown_quick())
        iters = 1;
    else
        hx_warm_up(s, warmup, step);
    hx_checked_step st;
    st.prepare = [](int, cudaStream_t) {};
    st.run = step;
    cudaEvent_t prep0, prep1;
    HX_CUDA(cudaEventCreate(&prep0));
    HX_CUDA(cudaEventCreate(&prep1));
    std::vector<double> times;
    for (int i = 0; i < iters; i++)
        times.push_back(hx_time_prepared_step(c, st, i, prep0, prep1));
    HX_CUDA(cudaEventDestroy(prep0));
    HX_CUDA(cudaEventDestroy(prep1));
    return hx_median(times);
}

// All ranks agree on pass/fail; rank 0 prints the verification line.
inline bool hx_report_verification(hx_ctx &c, hx_vouch &v, bool local_ok,
                                   const std::string &reason)
{
    int ok = local_ok ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!local_ok)
        fprintf(stderr, "rank %d: %s\n", c.rank, reason.c_str());
    MPI_Barrier(MPI_COMM_WORLD);
    if (v.verdict != "FAIL")
        v.verdict = all ? "PASS" : "FAIL";
    if (c.rank == 0) {
        if (all)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %s\n", local_ok ? "(see other ranks' stderr)" : reason.c_str());
        fflush(stdout);
    }
    return all != 0;
}

// Rank 0 prints the CUCO_RESULT line (and keeps its json for the vouch).
// extra is a JSON fragment of further fields (without braces), e.g.
// "\"tokens\":4096"; may be empty.
inline void hx_report_result(hx_ctx &c, hx_vouch &v, double time_ms, int iters,
                             double compute_ms, double comm_ms, const std::string &extra = "")
{
    if (c.rank != 0)
        return;
    char head[512];
    snprintf(head, sizeof head,
             "{\"time_ms\":%.6f,\"iters\":%d,\"compute_ms\":%.6f,\"comm_ms\":%.6f,"
             "\"ranks\":%d,\"nccl_version\":%d%s",
             time_ms, iters, compute_ms, comm_ms, c.nranks, NCCL_VERSION_CODE,
             hx_breakdown_quick() ? ",\"breakdown\":\"quick\"" : "");
    std::string json = std::string(head) + (extra.empty() ? "" : ",") + extra + "}";
    v.result_json = json;
    printf("CUCO_RESULT %s\n", json.c_str());
    fflush(stdout);
}
