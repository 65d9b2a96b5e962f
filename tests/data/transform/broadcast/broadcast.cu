// broadcast.cu: rooted collectives and the uniform all-to-all (ncclBroadcast,
// ncclBcast, ncclGather, ncclScatter, ncclAlltoAll), which the transform
// builds from device point-to-point. Every result is checked on the host.
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

__global__ void fill(float *x, size_t n, float base)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = base + (float)(i % 1000);
}

static size_t arg_n(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--n") == 0)
            return (size_t)atol(argv[i + 1]);
    return 1 << 20;
}

static ncclComm_t init_comm(int *rank, int *nranks)
{
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, nranks);
    int ndev = 1;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(*rank % ndev));
    ncclUniqueId id;
    if (*rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, *nranks, id, *rank));
    return comm;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    ncclComm_t comm = init_comm(&rank, &nranks);
    size_t n = arg_n(argc, argv);
    float *buf, *gathered, *scattered, *a2a_in, *a2a_out;
    CK(cudaMalloc(&buf, n * sizeof(float)));
    CK(cudaMalloc(&gathered, n * nranks * sizeof(float)));
    CK(cudaMalloc(&scattered, n * sizeof(float)));
    CK(cudaMalloc(&a2a_in, n * nranks * sizeof(float)));
    CK(cudaMalloc(&a2a_out, n * nranks * sizeof(float)));
    const int root = nranks - 1;
    fill<<<64, 256>>>(buf, n, rank == root ? 7.0f : -1.0f);
    for (int r = 0; r < nranks; r++)
        fill<<<64, 256>>>(a2a_in + (size_t)r * n, n, 1000.0f * rank + 10.0f * r);
    CK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    NK(ncclBroadcast(buf, buf, n, ncclFloat32, root, comm, 0));
    NK(ncclBcast(buf, n, ncclFloat32, root, comm, 0));
    NK(ncclGather(buf, gathered, n, ncclFloat32, root, comm, 0));
    NK(ncclScatter(gathered, scattered, n, ncclFloat32, root, comm, 0));
    NK(ncclAlltoAll(a2a_in, a2a_out, n, ncclFloat32, comm, 0));
    CK(cudaDeviceSynchronize());
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<float> h(n), hs(n), ha(n * nranks), hg(n * nranks);
    CK(cudaMemcpy(h.data(), buf, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hs.data(), scattered, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(ha.data(), a2a_out, n * nranks * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hg.data(), gathered, n * nranks * sizeof(float), cudaMemcpyDeviceToHost));
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        float want = 7.0f + (float)(i % 1000);
        bad += h[i] != want;  // broadcast from the root
        bad += hs[i] != want; // scatter of the gathered copies
        for (int r = 0; r < nranks; r++) {
            bad += ha[(size_t)r * n + i] != 1000.0f * r + 10.0f * rank + (float)(i % 1000);
            if (rank == root)
                bad += hg[(size_t)r * n + i] != want;
        }
    }
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("Verification: %s\n", all_bad ? "FAIL" : "PASS");
        printf("CUCO_RESULT {\"time_ms\": %.4f, \"iters\": 1}\n", ms);
    }
    CK(cudaFree(buf));
    CK(cudaFree(gathered));
    CK(cudaFree(scattered));
    CK(cudaFree(a2a_in));
    CK(cudaFree(a2a_out));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return 0;
}
