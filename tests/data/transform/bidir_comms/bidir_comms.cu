// bidir_comms.cu: a pipeline step with its two directions on two
// communicators (activations forward on the world communicator, gradients
// backward on a copy of it made by ncclCommSplit, so that the two rings
// never wait on each other's queue), then the weight gradients summed with
// ncclAllReduce on the world communicator. Prints `Verification: PASS` when
// both received blocks and the sum hold their closed forms, then
// CUCO_RESULT with one step.
// Usage: bidir_comms N STEPS
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CU(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)
#define NC(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); std::exit(1); } } while (0)

__global__ void fill(float *x, size_t n, float base)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = base + (float)(i % 13);
}

struct Ring {
    ncclComm_t comm, back;
    cudaStream_t stream;
    int rank, size;
    float *block, *from_prev, *grad_out, *from_next, *grad;
    size_t n;
};

static void step(Ring &r)
{
    int next = (r.rank + 1) % r.size, prev = (r.rank + r.size - 1) % r.size;
    fill<<<256, 256, 0, r.stream>>>(r.block, r.n, (float)r.rank);
    fill<<<256, 256, 0, r.stream>>>(r.grad_out, r.n, 100.0f + (float)r.rank);
    fill<<<256, 256, 0, r.stream>>>(r.grad, r.n, 1.0f);
    NC(ncclGroupStart()); // forward: to the next stage
    NC(ncclSend(r.block, r.n, ncclFloat, next, r.comm, r.stream));
    NC(ncclRecv(r.from_prev, r.n, ncclFloat, prev, r.comm, r.stream));
    NC(ncclGroupEnd());
    NC(ncclGroupStart()); // backward: to the previous stage
    NC(ncclSend(r.grad_out, r.n, ncclFloat, prev, r.back, r.stream));
    NC(ncclRecv(r.from_next, r.n, ncclFloat, next, r.back, r.stream));
    NC(ncclGroupEnd());
    NC(ncclAllReduce(r.grad, r.grad, r.n, ncclFloat, ncclSum, r.comm, r.stream));
}

static long count_wrong(const Ring &r)
{
    std::vector<float> got(r.n), back(r.n), sum(r.n);
    CU(cudaMemcpy(got.data(), r.from_prev, r.n * sizeof(float), cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(back.data(), r.from_next, r.n * sizeof(float), cudaMemcpyDeviceToHost));
    CU(cudaMemcpy(sum.data(), r.grad, r.n * sizeof(float), cudaMemcpyDeviceToHost));
    int prev = (r.rank + r.size - 1) % r.size, next = (r.rank + 1) % r.size;
    long bad = 0;
    for (size_t i = 0; i < r.n; i++)
        bad += (got[i] != (float)prev + (float)(i % 13)) + (back[i] != 100.0f + (float)next + (float)(i % 13)) +
               (sum[i] != (float)r.size * (1.0f + (float)(i % 13)));
    return bad;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Ring r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.size);
    r.n = argc > 1 ? (size_t)std::atol(argv[1]) : 1 << 20;
    int steps = argc > 2 ? std::atoi(argv[2]) : 20;
    int ndev = 1;
    CU(cudaGetDeviceCount(&ndev));
    CU(cudaSetDevice(r.rank % ndev));
    ncclUniqueId id;
    if (r.rank == 0)
        NC(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NC(ncclCommInitRank(&r.comm, r.size, id, r.rank));
    NC(ncclCommSplit(r.comm, 0, r.rank, &r.back, nullptr));
    CU(cudaStreamCreate(&r.stream));
    CU(cudaMalloc(&r.block, r.n * sizeof(float)));
    CU(cudaMalloc(&r.from_prev, r.n * sizeof(float)));
    CU(cudaMalloc(&r.grad_out, r.n * sizeof(float)));
    CU(cudaMalloc(&r.from_next, r.n * sizeof(float)));
    CU(cudaMalloc(&r.grad, r.n * sizeof(float)));

    step(r);
    CU(cudaStreamSynchronize(r.stream));
    long bad = count_wrong(r), bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; s++)
        step(r);
    CU(cudaStreamSynchronize(r.stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    if (r.rank == 0) {
        if (bad_all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %ld values differ\n", bad_all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms, steps);
    }
    CU(cudaFree(r.block));
    CU(cudaFree(r.from_prev));
    CU(cudaFree(r.grad_out));
    CU(cudaFree(r.from_next));
    CU(cudaFree(r.grad));
    NC(ncclCommDestroy(r.back));
    NC(ncclCommDestroy(r.comm));
    MPI_Finalize();
    return bad_all != 0;
}
