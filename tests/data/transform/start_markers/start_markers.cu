// start_markers.cu: a seed laid out for another evolution tool: two block
// start markers and no end marker. Each block runs to the next start marker
// or to the end of the file, so only the includes and macros above the
// first marker are frozen. A reduction of per-rank partial sums.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK_CUDA(c) do { cudaError_t s_ = (c); if (s_ != cudaSuccess) { printf("cuda error %s line %d\n", cudaGetErrorString(s_), __LINE__); exit(1); } } while (0)
#define CHECK_NCCL(c) do { ncclResult_t s_ = (c); if (s_ != ncclSuccess) { printf("nccl error %s line %d\n", ncclGetErrorString(s_), __LINE__); exit(1); } } while (0)

// EVOLVE-BLOCK-START
__global__ void partial_sums(const float *x, float *part, int n, int chunk)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c * chunk >= n)
        return;
    float s = 0.f;
    for (int i = c * chunk; i < n && i < (c + 1) * chunk; i++)
        s += x[i];
    part[c] = s;
}

void reduce_partials(float *part, int chunks, ncclComm_t comm, cudaStream_t stream)
{
    CHECK_NCCL(ncclAllReduce(part, part, chunks, ncclFloat, ncclSum, comm, stream));
}

// EVOLVE-BLOCK-START
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : (1 << 22), chunk = 256, reps = argc > 2 ? atoi(argv[2]) : 20;
    int chunks = (n + chunk - 1) / chunk;
    CHECK_CUDA(cudaSetDevice(rank));
    ncclUniqueId id;
    if (rank == 0)
        ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, size, id, rank));
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));

    std::vector<float> hx(n);
    for (int i = 0; i < n; i++)
        hx[i] = (float)((i + rank) % 7);
    float *x, *part;
    CHECK_CUDA(cudaMalloc(&x, n * sizeof(float)));
    CHECK_CUDA(cudaMalloc(&part, chunks * sizeof(float)));
    CHECK_CUDA(cudaMemcpy(x, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    partial_sums<<<(chunks + 127) / 128, 128, 0, stream>>>(x, part, n, chunk);
    reduce_partials(part, chunks, comm, stream);
    CHECK_CUDA(cudaStreamSynchronize(stream));

    std::vector<float> hp(chunks);
    CHECK_CUDA(cudaMemcpy(hp.data(), part, chunks * sizeof(float), cudaMemcpyDeviceToHost));
    int errors = 0;
    for (int c = 0; c < chunks; c++) {
        float want = 0.f;
        for (int r = 0; r < size; r++)
            for (int i = c * chunk; i < n && i < (c + 1) * chunk; i++)
                want += (float)((i + r) % 7);
        if (hp[c] != want)
            errors++;
    }
    printf("Verification: %s\n", errors == 0 ? "PASS" : "FAIL partial sums differ");

    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; r++) {
        partial_sums<<<(chunks + 127) / 128, 128, 0, stream>>>(x, part, n, chunk);
        reduce_partials(part, chunks, comm, stream);
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    if (rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, reps);
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(part));
    ncclCommDestroy(comm);
    MPI_Finalize();
    return errors != 0;
}
