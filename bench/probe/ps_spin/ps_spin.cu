// ps_spin.cu: a variant of tests/data/transform/params_struct for the
// transport probe (scripts/device.d/41-transport-probe.sh): ps_stream's one pass, then a kernel that spins ~1.3 ms on
// clock64 and touches no memory.
// Verification as there. Where params_struct's gen_0 loses to its seed with
// the device all-gather, this variant tells whether the work between the
// gathers is the cause (bench/README.md, "Device all-gather before an
// L2-bound reader").
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { fprintf(stderr, "CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NK(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess) { fprintf(stderr, "NCCL %s at %s:%d\n", ncclGetErrorString(r_), __FILE__, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

enum { ROWS = 256, THREADS = 256 };

struct AttnParams {
    const float *q;
    const float *keys;
    float *out;
    int rows;
    size_t nkeys;
    float *total;
};

static void set_params(AttnParams &p, const float *q, const float *keys, float *out, int rows, size_t nkeys, float *total)
{
    memset(&p, 0, sizeof(p));
    p.q = q;
    p.keys = keys;
    p.out = out;
    p.rows = rows;
    p.nkeys = nkeys;
    p.total = total;
}

__global__ void make_keys(float *keys, size_t n, int rank, int it)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        keys[i] = 0.25f * (float)(rank * 7 + (int)(i % 5) + it);
}

__global__ void project_q(const float *x, float *q, int rows, int it)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows)
        q[r] = 0.5f * x[r] + (float)it;
}

__global__ void key_sum(AttnParams p)
{
    __shared__ float part[THREADS];
    float s = 0.0f;
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < p.nkeys; k += (size_t)gridDim.x * blockDim.x)
        s += p.keys[k];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(p.total, part[0]);
}

__global__ void apply(AttnParams p)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < p.rows)
        p.out[r] += p.q[r] * *p.total / (float)p.nkeys;
}

__global__ void spin(float *sink)
{
    long long t0 = clock64();
    while (clock64() - t0 < 2600000LL) {
    }
    if (t0 == -1)
        sink[0] = 1.0f;
}

static size_t arg_size(int argc, char **argv, const char *name, size_t dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], name) == 0)
            return (size_t)strtoull(argv[i + 1], NULL, 10);
    return dflt;
}

static void run_steps(const float *x, float *q, float *local, float *keys, float *out, float *total, size_t n, int rank,
                      int nranks, int iters, ncclComm_t comm, cudaStream_t st)
{
    AttnParams prm;
    set_params(prm, q, keys, out, ROWS, n * (size_t)nranks, total);
    for (int it = 0; it < iters; it++) {
        make_keys<<<256, THREADS, 0, st>>>(local, n, rank, it);
        NK(ncclAllGather(local, keys, n, ncclFloat32, comm, st));
        project_q<<<(ROWS + THREADS - 1) / THREADS, THREADS, 0, st>>>(x, q, ROWS, it);
        CK(cudaMemsetAsync(total, 0, sizeof(float), st));
        key_sum<<<264, THREADS, 0, st>>>(prm);
        apply<<<1, ROWS, 0, st>>>(prm);
        spin<<<132, 32, 0, st>>>(total + 1);
    }
}

static int verify(const std::vector<float> &out, size_t n, int nranks, int iters)
{
    int bad = 0;
    for (int r = 0; r < ROWS; r++) {
        double want = 0;
        for (int it = 0; it < iters; it++) {
            double sum = 0;
            for (int src = 0; src < nranks; src++)
                for (size_t i = 0; i < n; i++)
                    sum += 0.25 * (double)(src * 7 + (int)(i % 5) + it);
            want += (0.5 * (double)(r % 11) + it) * sum / (double)(n * (size_t)nranks);
        }
        bad += std::fabs(out[r] - want) > 1e-4 * std::fabs(want) + 1e-3;
    }
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
    size_t n = arg_size(argc, argv, "--n", 1 << 20), total = n * (size_t)nranks;
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    std::vector<float> hx(ROWS);
    for (int r = 0; r < ROWS; r++)
        hx[r] = (float)(r % 11);
    float *x, *q, *local, *keys, *out, *ksum;
    CK(cudaMalloc(&x, ROWS * sizeof(float)));
    CK(cudaMalloc(&q, ROWS * sizeof(float)));
    CK(cudaMalloc(&local, n * sizeof(float)));
    CK(cudaMalloc(&keys, total * sizeof(float)));
    CK(cudaMalloc(&out, ROWS * sizeof(float)));
    CK(cudaMalloc(&ksum, 2 * sizeof(float)));
    CK(cudaMemcpy(x, hx.data(), ROWS * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemsetAsync(keys, 0, total * sizeof(float), st));
    CK(cudaMemsetAsync(out, 0, ROWS * sizeof(float), st));
    const int iters = 3;
    run_steps(x, q, local, keys, out, ksum, n, rank, nranks, iters, comm, st);
    CK(cudaStreamSynchronize(st));
    std::vector<float> host(ROWS);
    CK(cudaMemcpy(host.data(), out, ROWS * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = verify(host, n, nranks, iters), bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("Verification: %s\n", bad_all ? "FAIL wrong attention sums" : "PASS");
    auto t0 = std::chrono::steady_clock::now();
    run_steps(x, q, local, keys, out, ksum, n, rank, nranks, 10, comm, st);
    CK(cudaStreamSynchronize(st));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 10;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": 10}\n", ms);
    CK(cudaFree(x));
    CK(cudaFree(q));
    CK(cudaFree(local));
    CK(cudaFree(keys));
    CK(cudaFree(out));
    CK(cudaFree(ksum));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad_all != 0;
}
