/* jacobi_halo.cu: 2D Jacobi solver with NCCL halo exchange, in the style of
 * the multi-GPU programming model samples.
 *
 * The grid is split by rows across ranks (periodic in y). Each iteration
 * computes the interior on the compute stream, then the boundary rows are
 * exchanged with the neighbours on a separate push stream: ncclRecv into the
 * halo rows and ncclSend of the first and last owned rows, in one NCCL group.
 * Events order the streams both ways. Every few iterations the residual norm
 * is summed with ncclAllReduce. The NCCL type comes from a macro next to the
 * real typedef.
 *
 * Check: the host runs the same iterations on the whole grid and compares
 * every owned row of every rank, and the last global norm.
 *
 * mpirun -np N ./jacobi_halo [nx] [ny_per_rank] [iters] [timed_iters]
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

typedef float real;
#define NCCL_REAL_TYPE ncclFloat

#define CUDA_RT_CALL(call)                                                                        \
    {                                                                                             \
        cudaError_t cudaStatus = call;                                                            \
        if (cudaSuccess != cudaStatus) {                                                          \
            fprintf(stderr, "ERROR: CUDA RT call \"%s\" in line %d of file %s failed with %s (%d).\n", \
                    #call, __LINE__, __FILE__, cudaGetErrorString(cudaStatus), cudaStatus);       \
            exit(cudaStatus);                                                                     \
        }                                                                                         \
    }

#define NCCL_CALL(call)                                                                           \
    {                                                                                             \
        ncclResult_t ncclStatus = call;                                                           \
        if (ncclSuccess != ncclStatus) {                                                          \
            fprintf(stderr, "ERROR: NCCL call \"%s\" in line %d of file %s failed with %s (%d).\n", \
                    #call, __LINE__, __FILE__, ncclGetErrorString(ncclStatus), ncclStatus);       \
            exit(ncclStatus);                                                                     \
        }                                                                                         \
    }

static const int check_every = 4;

__host__ __device__ inline real initial(int gy, int x, int nx) { return (x == 0 || x == nx - 1) ? (real)((gy % 9) + 1) : (real)0; }

/* rows iy_start..iy_end-1 are owned; rows 0 and iy_end are halos */
__global__ void initialize(real *a, int nx, int ny_local, int first_row)
{
    int iy = blockIdx.y * blockDim.y + threadIdx.y, ix = blockIdx.x * blockDim.x + threadIdx.x;
    if (iy < ny_local + 2 && ix < nx)
        a[iy * nx + ix] = iy >= 1 && iy <= ny_local ? initial(first_row + iy - 1, ix, nx) : (real)0;
}

__global__ void jacobi_kernel(real *a_new, const real *a, real *l2_norm, int iy_start, int iy_end, int nx)
{
    int iy = blockIdx.y * blockDim.y + threadIdx.y + iy_start;
    int ix = blockIdx.x * blockDim.x + threadIdx.x + 1;
    real local = 0;
    if (iy < iy_end && ix < nx - 1) {
        real v = (real)0.25 * (a[iy * nx + ix + 1] + a[iy * nx + ix - 1] + a[(iy + 1) * nx + ix] + a[(iy - 1) * nx + ix]);
        a_new[iy * nx + ix] = v;
        real d = v - a[iy * nx + ix];
        local = d * d;
    }
    if (l2_norm && local != (real)0)
        atomicAdd(l2_norm, local);
}

__global__ void copy_boundary_columns(real *a_new, const real *a, int iy_start, int iy_end, int nx)
{
    int iy = blockIdx.x * blockDim.x + threadIdx.x + iy_start;
    if (iy < iy_end) {
        a_new[iy * nx] = a[iy * nx];
        a_new[iy * nx + nx - 1] = a[iy * nx + nx - 1];
    }
}

struct Solver {
    int rank, size, nx, ny;
    real *a, *a_new, *l2_norm_d, *l2_global_d;
    ncclComm_t nccl_comm;
    cudaStream_t compute_stream, push_stream;
    cudaEvent_t compute_done, push_done;
};

static void iteration(Solver &s, bool calculate_norm)
{
    const int iy_start = 1, iy_end = s.ny + 1;
    const int top = s.rank > 0 ? s.rank - 1 : s.size - 1;
    const int bottom = (s.rank + 1) % s.size;
    dim3 block(32, 8), grid((s.nx + 31) / 32, (s.ny + 7) / 8);
    CUDA_RT_CALL(cudaStreamWaitEvent(s.compute_stream, s.push_done, 0));
    if (calculate_norm)
        CUDA_RT_CALL(cudaMemsetAsync(s.l2_norm_d, 0, sizeof(real), s.compute_stream));
    jacobi_kernel<<<grid, block, 0, s.compute_stream>>>(s.a_new, s.a, calculate_norm ? s.l2_norm_d : nullptr,
                                                        iy_start, iy_end, s.nx);
    copy_boundary_columns<<<(s.ny + 127) / 128, 128, 0, s.compute_stream>>>(s.a_new, s.a, iy_start, iy_end, s.nx);
    CUDA_RT_CALL(cudaEventRecord(s.compute_done, s.compute_stream));
    if (calculate_norm)
        NCCL_CALL(ncclAllReduce(s.l2_norm_d, s.l2_global_d, 1, NCCL_REAL_TYPE, ncclSum, s.nccl_comm, s.compute_stream));

    CUDA_RT_CALL(cudaStreamWaitEvent(s.push_stream, s.compute_done, 0));
    NCCL_CALL(ncclGroupStart());
    NCCL_CALL(ncclRecv(s.a_new, s.nx, NCCL_REAL_TYPE, top, s.nccl_comm, s.push_stream));
    NCCL_CALL(ncclRecv(s.a_new + (iy_end * s.nx), s.nx, NCCL_REAL_TYPE, bottom, s.nccl_comm, s.push_stream));
    NCCL_CALL(ncclSend(s.a_new + (iy_end - 1) * s.nx, s.nx, NCCL_REAL_TYPE, bottom, s.nccl_comm, s.push_stream));
    NCCL_CALL(ncclSend(s.a_new + iy_start * s.nx, s.nx, NCCL_REAL_TYPE, top, s.nccl_comm, s.push_stream));
    NCCL_CALL(ncclGroupEnd());
    CUDA_RT_CALL(cudaEventRecord(s.push_done, s.push_stream));
    std::swap(s.a_new, s.a);
}

static void host_reference(std::vector<real> &g, int nx, int ny_total, int iters, real *last_norm)
{
    std::vector<real> n(g);
    for (int it = 0; it < iters; it++) {
        real norm = 0;
        for (int y = 0; y < ny_total; y++) {
            int up = (y + ny_total - 1) % ny_total, down = (y + 1) % ny_total;
            for (int x = 1; x < nx - 1; x++) {
                real v = (real)0.25 * (g[y * nx + x + 1] + g[y * nx + x - 1] + g[down * nx + x] + g[up * nx + x]);
                n[y * nx + x] = v;
                norm += (v - g[y * nx + x]) * (v - g[y * nx + x]);
            }
        }
        if ((it + 1) % check_every == 0)
            *last_norm = norm;
        std::swap(g, n);
    }
}

int main(int argc, char *argv[])
{
    MPI_Init(&argc, &argv);
    Solver s;
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    s.nx = argc > 1 ? atoi(argv[1]) : 4096;
    s.ny = argc > 2 ? atoi(argv[2]) : 1024;
    int iters = argc > 3 ? atoi(argv[3]) : 8;
    int timed = argc > 4 ? atoi(argv[4]) : 10;
    int num_devices = 0;
    CUDA_RT_CALL(cudaGetDeviceCount(&num_devices));
    CUDA_RT_CALL(cudaSetDevice(s.rank % num_devices));

    ncclUniqueId nccl_uid;
    if (s.rank == 0)
        NCCL_CALL(ncclGetUniqueId(&nccl_uid));
    MPI_Bcast(&nccl_uid, sizeof(ncclUniqueId), MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCL_CALL(ncclCommInitRank(&s.nccl_comm, s.size, nccl_uid, s.rank));

    size_t bytes = (size_t)s.nx * (s.ny + 2) * sizeof(real);
    CUDA_RT_CALL(cudaMalloc(&s.a, bytes));
    CUDA_RT_CALL(cudaMalloc(&s.a_new, bytes));
    CUDA_RT_CALL(cudaMalloc(&s.l2_norm_d, sizeof(real)));
    CUDA_RT_CALL(cudaMalloc(&s.l2_global_d, sizeof(real)));
    CUDA_RT_CALL(cudaStreamCreateWithFlags(&s.compute_stream, cudaStreamNonBlocking));
    CUDA_RT_CALL(cudaStreamCreateWithFlags(&s.push_stream, cudaStreamNonBlocking));
    CUDA_RT_CALL(cudaEventCreateWithFlags(&s.compute_done, cudaEventDisableTiming));
    CUDA_RT_CALL(cudaEventCreateWithFlags(&s.push_done, cudaEventDisableTiming));

    auto reset = [&]() {
        dim3 block(32, 8), grid((s.nx + 31) / 32, (s.ny + 2 + 7) / 8);
        initialize<<<grid, block, 0, s.compute_stream>>>(s.a, s.nx, s.ny, s.rank * s.ny);
        initialize<<<grid, block, 0, s.compute_stream>>>(s.a_new, s.nx, s.ny, s.rank * s.ny);
        CUDA_RT_CALL(cudaStreamSynchronize(s.compute_stream));
        /* the first halo rows come from the neighbours' initial rows */
        const int top = s.rank > 0 ? s.rank - 1 : s.size - 1, bottom = (s.rank + 1) % s.size;
        NCCL_CALL(ncclGroupStart());
        NCCL_CALL(ncclRecv(s.a, s.nx, NCCL_REAL_TYPE, top, s.nccl_comm, s.compute_stream));
        NCCL_CALL(ncclRecv(s.a + (s.ny + 1) * s.nx, s.nx, NCCL_REAL_TYPE, bottom, s.nccl_comm, s.compute_stream));
        NCCL_CALL(ncclSend(s.a + s.ny * s.nx, s.nx, NCCL_REAL_TYPE, bottom, s.nccl_comm, s.compute_stream));
        NCCL_CALL(ncclSend(s.a + s.nx, s.nx, NCCL_REAL_TYPE, top, s.nccl_comm, s.compute_stream));
        NCCL_CALL(ncclGroupEnd());
        CUDA_RT_CALL(cudaEventRecord(s.push_done, s.compute_stream));
        CUDA_RT_CALL(cudaStreamSynchronize(s.compute_stream));
    };
    reset();
    real norm = 0;
    for (int it = 0; it < iters; it++) {
        bool calc = (it + 1) % check_every == 0;
        iteration(s, calc);
        if (calc) {
            CUDA_RT_CALL(cudaStreamSynchronize(s.compute_stream));
            CUDA_RT_CALL(cudaMemcpy(&norm, s.l2_global_d, sizeof(real), cudaMemcpyDeviceToHost));
        }
    }
    CUDA_RT_CALL(cudaStreamSynchronize(s.push_stream));
    CUDA_RT_CALL(cudaStreamSynchronize(s.compute_stream));

    std::vector<real> mine((size_t)s.nx * (s.ny + 2));
    CUDA_RT_CALL(cudaMemcpy(mine.data(), s.a, bytes, cudaMemcpyDeviceToHost));
    int ny_total = s.ny * s.size;
    std::vector<real> g((size_t)s.nx * ny_total);
    for (int y = 0; y < ny_total; y++)
        for (int x = 0; x < s.nx; x++)
            g[(size_t)y * s.nx + x] = initial(y, x, s.nx);
    real ref_norm = 0;
    host_reference(g, s.nx, ny_total, iters, &ref_norm);
    long bad = 0;
    for (int y = 0; y < s.ny; y++)
        for (int x = 0; x < s.nx; x++) {
            real want = g[(size_t)(s.rank * s.ny + y) * s.nx + x], got = mine[(size_t)(y + 1) * s.nx + x];
            if (fabs(got - want) > 1e-4 * std::max((real)1, (real)fabs(want)))
                bad++;
        }
    if (iters >= check_every && fabs(norm - ref_norm) > 1e-3 * std::max((real)1, ref_norm))
        bad++;
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    std::vector<double> times;
    for (int it = 0; it < timed + 2; it++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        iteration(s, true);
        CUDA_RT_CALL(cudaStreamSynchronize(s.push_stream));
        CUDA_RT_CALL(cudaStreamSynchronize(s.compute_stream));
        if (it >= 2)
            times.push_back((MPI_Wtime() - t0) * 1e3);
    }
    std::sort(times.begin(), times.end());
    if (s.rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld values differ from the host solver\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"nx\": %d, \"ny\": %d}\n",
               times.empty() ? 0.0 : times[times.size() / 2], timed, s.nx, ny_total);
    }
    CUDA_RT_CALL(cudaEventDestroy(s.push_done));
    CUDA_RT_CALL(cudaEventDestroy(s.compute_done));
    CUDA_RT_CALL(cudaStreamDestroy(s.push_stream));
    CUDA_RT_CALL(cudaStreamDestroy(s.compute_stream));
    CUDA_RT_CALL(cudaFree(s.l2_global_d));
    CUDA_RT_CALL(cudaFree(s.l2_norm_d));
    CUDA_RT_CALL(cudaFree(s.a_new));
    CUDA_RT_CALL(cudaFree(s.a));
    NCCL_CALL(ncclCommDestroy(s.nccl_comm));
    MPI_Finalize();
    return bad_all != 0;
}
