/* ref_solver_scopes.cu: a distributed smoother checked against a
 * single-GPU reference solver that uses the same variable names.
 *
 * solve_distributed() smooths this rank's share of a 1D field, then sums the
 * smoothed fields of all ranks with ncclAllReduce. solve_reference() runs on
 * one GPU with buffers of the same names (d_cur, d_next, d_sum), computes
 * every rank's field itself and copies between its own buffers with
 * device-to-device cudaMemcpy: local work, no communication. Only the
 * distributed buffers take part in a collective.
 *
 * Check: the all-reduced field equals the reference's sum on every element.
 *
 * mpirun -np N ./ref_solver_scopes [n] [sweeps] [timed_iters]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(call)                                                                             \
    do {                                                                                     \
        cudaError_t st_ = (call);                                                            \
        if (st_ != cudaSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(st_));     \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)
#define NK(call)                                                                             \
    do {                                                                                     \
        ncclResult_t st_ = (call);                                                           \
        if (st_ != ncclSuccess) {                                                            \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(st_));     \
            exit(1);                                                                         \
        }                                                                                    \
    } while (0)

__host__ __device__ inline float seed_value(long i, int r) { return (float)((i * 7 + r * 3) % 23) * 0.25f; }

__global__ void init_field(float *f, long n, int r)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        f[i] = seed_value(i, r);
}

__global__ void smooth(const float *in, float *out, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        float l = in[i > 0 ? i - 1 : i], c = in[i], r = in[i + 1 < n ? i + 1 : i];
        out[i] = 0.25f * l + 0.5f * c + 0.25f * r;
    }
}

__global__ void accumulate(float *sum, const float *f, long n)
{
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        sum[i] += f[i];
}

/* The distributed solver: smooth this rank's field, then sum over ranks. */
static void solve_distributed(long n, int sweeps, int rank, ncclComm_t comm, cudaStream_t s, float *result)
{
    float *d_cur, *d_next, *d_sum;
    CK(cudaMalloc(&d_cur, n * sizeof(float)));
    CK(cudaMalloc(&d_next, n * sizeof(float)));
    CK(cudaMalloc(&d_sum, n * sizeof(float)));
    init_field<<<64, 256, 0, s>>>(d_cur, n, rank);
    for (int k = 0; k < sweeps; ++k) {
        smooth<<<64, 256, 0, s>>>(d_cur, d_next, n);
        std::swap(d_cur, d_next);
    }
    NK(ncclAllReduce(d_cur, d_sum, n, ncclFloat, ncclSum, comm, s));
    CK(cudaStreamSynchronize(s));
    CK(cudaMemcpy(result, d_sum, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaFree(d_cur));
    CK(cudaFree(d_next));
    CK(cudaFree(d_sum));
}

/* The single-GPU reference: every rank's field on this GPU, the same names. */
static void solve_reference(long n, int sweeps, int nranks, float *result)
{
    float *d_cur, *d_next, *d_sum;
    CK(cudaMalloc(&d_cur, n * sizeof(float)));
    CK(cudaMalloc(&d_next, n * sizeof(float)));
    CK(cudaMalloc(&d_sum, n * sizeof(float)));
    CK(cudaMemset(d_sum, 0, n * sizeof(float)));
    for (int r = 0; r < nranks; ++r) {
        init_field<<<64, 256>>>(d_next, n, r);
        CK(cudaMemcpy(d_cur, d_next, n * sizeof(float), cudaMemcpyDeviceToDevice));
        for (int k = 0; k < sweeps; ++k) {
            smooth<<<64, 256>>>(d_cur, d_next, n);
            CK(cudaMemcpy(d_cur, d_next, n * sizeof(float), cudaMemcpyDeviceToDevice));
        }
        accumulate<<<64, 256>>>(d_sum, d_cur, n);
    }
    CK(cudaMemcpy(result, d_sum, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaFree(d_cur));
    CK(cudaFree(d_next));
    CK(cudaFree(d_sum));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1 << 22;
    int sweeps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 8;
    int timed = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 10;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
    cudaStream_t s;
    CK(cudaStreamCreate(&s));

    std::vector<float> got(n), want(n);
    solve_distributed(n, sweeps, rank, comm, s, got.data());
    solve_reference(n, sweeps, nranks, want.data());
    long bad = 0;
    for (long i = 0; i < n; ++i)
        if (fabsf(got[i] - want[i]) > 1e-4f * std::max(1.0f, fabsf(want[i])))
            bad++;

    std::vector<double> times;
    for (int it = 0; it < timed; ++it) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = std::chrono::steady_clock::now();
        solve_distributed(n, sweeps, rank, comm, s, got.data());
        auto t1 = std::chrono::steady_clock::now();
        times.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(times.begin(), times.end());
    long all_bad = 0;
    MPI_Allreduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        if (all_bad == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld elements differ from the reference\n", all_bad);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", times.empty() ? 0.0 : times[times.size() / 2],
               timed);
    }
    CK(cudaStreamDestroy(s));
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return all_bad != 0;
}
