// alltoall_pack.cu: a token exchange in the style of expert-parallel layers.
// Each rank packs its tokens per destination into a send buffer with
// device-to-device copies, exchanges them with ncclAlltoAll and unpacks what
// it received into an output buffer with more device-to-device copies (local
// packing, not communication). The exchange buffers come from ncclMemAlloc
// and are registered as windows when --nccl-mem is given, from cudaMalloc
// otherwise: both paths must become symmetric.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { fprintf(stderr, "NCCL %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

struct Options {
    size_t tokens = 4096; // per destination
    bool nccl_mem = false;
    int iters = 10;
};

static Options parse(int argc, char **argv)
{
    Options o;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokens") && i + 1 < argc)
            o.tokens = strtoul(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--nccl-mem"))
            o.nccl_mem = true;
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            o.iters = atoi(argv[++i]);
    }
    return o;
}

__global__ void make_tokens(float *t, size_t n, int rank)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        t[i] = (float)(rank * 100000 + (int)(i % 100000));
}

static void *exchange_alloc(size_t bytes, const Options &o, ncclComm_t comm, ncclWindow_t *win)
{
    void *p = nullptr;
    if (o.nccl_mem) {
        NK(ncclMemAlloc(&p, bytes));
        NK(ncclCommWindowRegister(comm, p, bytes, win, NCCL_WIN_COLL_SYMMETRIC));
    } else {
        CK(cudaMalloc(&p, bytes));
        *win = nullptr;
    }
    return p;
}

static void exchange_free(void *p, const Options &o, ncclComm_t comm, ncclWindow_t win)
{
    if (o.nccl_mem) {
        NK(ncclCommWindowDeregister(comm, win));
        NK(ncclMemFree(p));
    } else {
        CK(cudaFree(p));
    }
}

// tokens is [nranks][tokens] in source order; the send buffer wants the
// destination blocks in reverse order, so packing is a real copy
static void pack(float *sendbuf, const float *tokens, size_t per, int nranks, cudaStream_t s)
{
    for (int d = 0; d < nranks; d++)
        CK(cudaMemcpyAsync(sendbuf + (size_t)d * per, tokens + (size_t)(nranks - 1 - d) * per,
                           per * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

static void unpack(float *out, const float *recvbuf, size_t per, int nranks, cudaStream_t s)
{
    for (int src = 0; src < nranks; src++)
        CK(cudaMemcpyAsync(out + (size_t)src * per, recvbuf + (size_t)src * per, per * sizeof(float),
                           cudaMemcpyDeviceToDevice, s));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    Options o = parse(argc, argv);
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t stream;
    CK(cudaStreamCreate(&stream));

    size_t per = o.tokens, total = per * nranks, bytes = total * sizeof(float);
    float *tokens = nullptr, *out = nullptr;
    CK(cudaMalloc(&tokens, bytes));
    CK(cudaMalloc(&out, bytes));
    ncclWindow_t send_win, recv_win;
    float *sendbuf = (float *)exchange_alloc(bytes, o, comm, &send_win);
    float *recvbuf = (float *)exchange_alloc(bytes, o, comm, &recv_win);
    make_tokens<<<64, 256, 0, stream>>>(tokens, total, rank);

    pack(sendbuf, tokens, per, nranks, stream);
    NK(ncclAlltoAll(sendbuf, recvbuf, per, ncclFloat32, comm, stream));
    unpack(out, recvbuf, per, nranks, stream);
    CK(cudaStreamSynchronize(stream));

    // block src of out is what src packed for this rank: its tokens block
    // nranks - 1 - rank, i.e. values src * 100000 + (nranks - 1 - rank) * per + i
    std::vector<float> host(total);
    CK(cudaMemcpy(host.data(), out, bytes, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (int src = 0; src < nranks; src++)
        for (size_t i = 0; i < per; i++) {
            size_t k = (size_t)(nranks - 1 - rank) * per + i;
            bad += host[(size_t)src * per + i] != (float)(src * 100000 + (int)(k % 100000));
        }
    printf("Verification: %s\n", bad ? "FAIL wrong tokens after the exchange" : "PASS");

    auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < o.iters; it++) {
        pack(sendbuf, tokens, per, nranks, stream);
        NK(ncclAlltoAll(sendbuf, recvbuf, per, ncclFloat32, comm, stream));
        unpack(out, recvbuf, per, nranks, stream);
    }
    CK(cudaStreamSynchronize(stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / o.iters;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, o.iters);
    exchange_free(sendbuf, o, comm, send_win);
    exchange_free(recvbuf, o, comm, recv_win);
    CK(cudaFree(tokens));
    CK(cudaFree(out));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad != 0;
}
