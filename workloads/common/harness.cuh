// harness.cuh: the frozen harness shared by cuco's GPU workloads.
//
// Every workload is an MPI program, one rank per GPU, that sets up NCCL from
// the host, runs its step, checks the result against an independent
// reference, and prints the two lines cuco reads:
//   Verification: PASS            (or "Verification: FAIL <reason>")
//   CUCO_RESULT {"time_ms":..., "iters":..., "compute_ms":..., "comm_ms":...}
// Nothing here is inside an EVOLVE-BLOCK: candidates may not change it.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
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

// MPI + device selection + NCCL communicator. Ranks map to local GPUs by
// their rank on the node, so launching node-major keeps NVLink peers together.
inline void hx_init(int *argc, char ***argv, hx_ctx &c)
{
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

inline void hx_finalize(hx_ctx &c)
{
    HX_CUDA(cudaStreamSynchronize(c.stream));
    HX_CUDA(cudaStreamSynchronize(c.comm_stream));
    HX_CUDA(cudaStreamDestroy(c.stream));
    HX_CUDA(cudaStreamDestroy(c.comm_stream));
    HX_NCCL(ncclCommDestroy(c.comm));
    MPI_Finalize();
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

// Times step() on stream s: a warm-up (hx_warm_up), then iters runs each
// bracketed by events. Every rank starts each iteration together (MPI
// barrier after a device sync) so a rank's time includes waiting for its
// peers, as in a real step. Returns the median over iterations of the
// slowest rank's time.
inline double hx_time_ms(hx_ctx &c, cudaStream_t s, int warmup, int iters,
                         const std::function<void()> &step)
{
    hx_warm_up(s, warmup, step);
    cudaEvent_t e0, e1;
    HX_CUDA(cudaEventCreate(&e0));
    HX_CUDA(cudaEventCreate(&e1));
    std::vector<double> times;
    for (int i = 0; i < iters; i++) {
        HX_CUDA(cudaDeviceSynchronize());
        MPI_Barrier(MPI_COMM_WORLD);
        HX_CUDA(cudaEventRecord(e0, s));
        step();
        HX_CUDA(cudaEventRecord(e1, s));
        HX_CUDA(cudaEventSynchronize(e1));
        float ms = 0;
        HX_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        double local = ms, worst = 0;
        MPI_Allreduce(&local, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        times.push_back(worst);
    }
    HX_CUDA(cudaEventDestroy(e0));
    HX_CUDA(cudaEventDestroy(e1));
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// All ranks agree on pass/fail; rank 0 prints the verification line.
inline bool hx_report_verification(hx_ctx &c, bool local_ok, const std::string &reason)
{
    int ok = local_ok ? 1 : 0, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!local_ok)
        fprintf(stderr, "rank %d: %s\n", c.rank, reason.c_str());
    MPI_Barrier(MPI_COMM_WORLD);
    if (c.rank == 0) {
        if (all)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %s\n", local_ok ? "(see other ranks' stderr)" : reason.c_str());
        fflush(stdout);
    }
    return all != 0;
}

// Rank 0 prints the CUCO_RESULT line. extra is a JSON fragment of further
// fields (without braces), e.g. "\"tokens\":4096"; may be empty.
inline void hx_report_result(hx_ctx &c, double time_ms, int iters, double compute_ms,
                             double comm_ms, const std::string &extra = "")
{
    if (c.rank != 0)
        return;
    printf("CUCO_RESULT {\"time_ms\":%.6f,\"iters\":%d,\"compute_ms\":%.6f,\"comm_ms\":%.6f,"
           "\"ranks\":%d,\"nccl_version\":%d%s%s}\n",
           time_ms, iters, compute_ms, comm_ms, c.nranks, NCCL_VERSION_CODE,
           extra.empty() ? "" : ",", extra.c_str());
    fflush(stdout);
}
