// cxx_allreduce.cpp: a data-parallel gradient average written as plain C++
// (no kernels: host code over the CUDA runtime and NCCL), the way training
// codes keep their communication in .cpp files. Built with nvcc.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDA_OK(x) do { cudaError_t err = (x); if (err != cudaSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err)); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)
#define NCCL_OK(x) do { ncclResult_t res = (x); if (res != ncclSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(res)); MPI_Abort(MPI_COMM_WORLD, 3); } } while (0)

class GradientSync {
  public:
    GradientSync(int rank, int world) : rank_(rank), world_(world)
    {
        ncclUniqueId id;
        if (rank_ == 0)
            NCCL_OK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
        NCCL_OK(ncclCommInitRank(&comm_, world_, id, rank_));
        CUDA_OK(cudaStreamCreate(&stream_));
    }
    ~GradientSync()
    {
        CUDA_OK(cudaStreamDestroy(stream_));
        NCCL_OK(ncclCommDestroy(comm_));
    }
    void sum(float *grads, size_t n)
    {
        NCCL_OK(ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, comm_, stream_));
    }
    void wait() { CUDA_OK(cudaStreamSynchronize(stream_)); }

  private:
    int rank_, world_;
    ncclComm_t comm_;
    cudaStream_t stream_;
};

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, world = 1, devices = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    CUDA_OK(cudaGetDeviceCount(&devices));
    CUDA_OK(cudaSetDevice(rank % devices));
    size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : (1u << 20);
    int steps = argc > 2 ? std::atoi(argv[2]) : 10;

    std::vector<float> host(n);
    for (size_t i = 0; i < n; i++)
        host[i] = (float)(rank + 1) * (float)(i % 97);
    float *grads = nullptr;
    CUDA_OK(cudaMalloc(&grads, n * sizeof(float)));
    {
        GradientSync sync(rank, world);
        CUDA_OK(cudaMemcpy(grads, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        sync.sum(grads, n);
        sync.wait();
        std::vector<float> got(n);
        CUDA_OK(cudaMemcpy(got.data(), grads, n * sizeof(float), cudaMemcpyDeviceToHost));
        float ranks_sum = world * (world + 1) / 2.0f;
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            wrong += std::fabs(got[i] - ranks_sum * (float)(i % 97)) > 1e-3f;
        std::printf("Verification: %s\n", wrong ? "FAIL sums differ" : "PASS");

        auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < steps; s++)
            sync.sum(grads, n);
        sync.wait();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
        if (rank == 0)
            std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, steps);
        if (wrong) {
            CUDA_OK(cudaFree(grads));
            MPI_Finalize();
            return 1;
        }
    }
    CUDA_OK(cudaFree(grads));
    MPI_Finalize();
    return 0;
}
