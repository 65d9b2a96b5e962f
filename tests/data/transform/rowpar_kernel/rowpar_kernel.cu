// rowpar_kernel: a row-parallel linear layer with a hand-written kernel
// instead of cuBLAS (tensor parallelism over the input features): each rank
// holds its slice of the features of every token and the matching rows of
// the weight, computes its partial product with `partial_rows` (one block per
// token row) and ncclAllReduce sums the partials in place. The layers sit in
// a std::vector and run in a range-for. The manifest declares the kernel
// rows_independent (rows=rows, args="x y"): the transform may reduce each
// range of rows as soon as it is made. Prints `Verification: PASS` when
// sampled rows match a host reference, then CUCO_RESULT with one forward.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d CUDA: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
#define NK(x) do { ncclResult_t r_ = (x); if (r_ != ncclSuccess) { fprintf(stderr, "%s:%d NCCL: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_)); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)

namespace {

__host__ __device__ float gen(unsigned long long i, int salt)
{
    unsigned long long h = (i * 2654435761ull + (unsigned long long)salt * 40503ull) ^ 0x5bd1e995ull;
    h = (h ^ (h >> 15)) * 0x2c1b3c6dull;
    return (float)((h >> 7) % 1001) / 1000.0f - 0.5f;
}

__global__ void fill(float *p, size_t n, unsigned long long first, int salt)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = gen(first + i, salt);
}

// y[r][:] = x[r][:] w, for r < rows (x: rows x din, w: din x dout).
__global__ void partial_rows(const float *x, const float *w, float *y, int rows, int din, int dout)
{
    extern __shared__ float xs[];
    int r = blockIdx.x;
    if (r >= rows)
        return;
    for (int i = threadIdx.x; i < din; i += blockDim.x)
        xs[i] = x[(size_t)r * din + i];
    __syncthreads();
    for (int o = threadIdx.x; o < dout; o += blockDim.x) {
        float acc = 0.0f;
        for (int i = 0; i < din; i++)
            acc += xs[i] * w[(size_t)i * dout + o];
        y[(size_t)r * dout + o] = acc;
    }
}

struct Layer {
    float *w = nullptr, *y = nullptr;
    int salt = 0;
};

struct Model {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank, nranks, rows, din, dout; // din: this rank's features
    float *x = nullptr;
    std::vector<Layer> layers;

    void forward()
    {
        for (Layer &L : layers) {
            partial_rows<<<rows, 256, din * sizeof(float), stream>>>(x, L.w, L.y, rows, din, dout);
            NK(ncclAllReduce(L.y, L.y, (size_t)rows * dout, ncclFloat, ncclSum, comm, stream));
        }
    }
};

int opt(int argc, char **argv, const char *name, int dflt)
{
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], name))
            return atoi(argv[i + 1]);
    return dflt;
}

// Mismatches of row r of layer l against the host reference (every rank's
// features: feature f of token r is gen(r * din_all + f, 1)).
int check(const Model &m, int l, int r)
{
    int din_all = m.din * m.nranks;
    std::vector<float> got(m.dout);
    CK(cudaMemcpy(got.data(), m.layers[l].y + (size_t)r * m.dout, m.dout * sizeof(float), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int o = 0; o < m.dout; o++) {
        double want = 0.0, mag = 0.0;
        for (int f = 0; f < din_all; f++) {
            double t = (double)gen((unsigned long long)r * din_all + f, 1) *
                       gen((unsigned long long)f * m.dout + o, 10 + l);
            want += t;
            mag += std::fabs(t);
        }
        bad += std::fabs(got[o] - want) > 1e-5 * mag + 1e-5;
    }
    return bad;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    Model m;
    MPI_Comm_rank(MPI_COMM_WORLD, &m.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m.nranks);
    int ndev = 1;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(m.rank % ndev));
    ncclUniqueId id;
    if (m.rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NK(ncclCommInitRank(&m.comm, m.nranks, id, m.rank));
    m.rows = opt(argc, argv, "--rows", 512);
    m.din = opt(argc, argv, "--din", 128);
    m.dout = opt(argc, argv, "--dout", 512);
    int nlayers = opt(argc, argv, "--layers", 2), iters = opt(argc, argv, "--iters", 10);
    CK(cudaStreamCreate(&m.stream));
    int din_all = m.din * m.nranks;
    // this rank's features of every token: columns [rank*din, (rank+1)*din)
    std::vector<float> xh((size_t)m.rows * m.din);
    for (int r = 0; r < m.rows; r++)
        for (int f = 0; f < m.din; f++)
            xh[(size_t)r * m.din + f] = gen((unsigned long long)r * din_all + m.rank * m.din + f, 1);
    CK(cudaMalloc(&m.x, xh.size() * sizeof(float)));
    CK(cudaMemcpy(m.x, xh.data(), xh.size() * sizeof(float), cudaMemcpyHostToDevice));
    m.layers.resize(nlayers);
    for (int l = 0; l < nlayers; l++) {
        Layer &L = m.layers[l];
        L.salt = 10 + l;
        CK(cudaMalloc(&L.w, (size_t)m.din * m.dout * sizeof(float)));
        CK(cudaMalloc(&L.y, (size_t)m.rows * m.dout * sizeof(float)));
        fill<<<256, 256, 0, m.stream>>>(L.w, (size_t)m.din * m.dout, (unsigned long long)m.rank * m.din * m.dout, L.salt);
    }
    CK(cudaGetLastError());
    m.forward();
    CK(cudaStreamSynchronize(m.stream));
    int bad = 0;
    for (int l = 0; l < nlayers; l++)
        for (int r : {0, 1, m.rows / 3, m.rows - 1})
            bad += check(m, l, r);
    int bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (m.rank == 0)
        printf("Verification: %s\n", bad_all ? "FAIL wrong reduced rows" : "PASS");
    MPI_Barrier(MPI_COMM_WORLD);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++)
        m.forward();
    CK(cudaStreamSynchronize(m.stream));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (m.rank == 0)
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / (iters > 0 ? iters : 1), iters);
    for (Layer &L : m.layers) {
        cudaFree(L.w);
        cudaFree(L.y);
    }
    cudaFree(m.x);
    NK(ncclCommDestroy(m.comm));
    MPI_Finalize();
    return bad_all != 0;
}
