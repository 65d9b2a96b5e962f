// graph_replay.cu: a decode-style step captured once into a CUDA graph and
// replayed (the way inference engines run their small steps): each layer
// mixes the hidden state, passes it one rank along a ring (grouped
// ncclSend/ncclRecv), averages it with what came in and sums it over the
// ranks: an in-place ncclAllReduce on even layers, a ncclReduceScatter into
// the rank's shard then a ncclAllGather of the shards on odd ones (the same
// sum). The engine warms up eagerly, then captures
// its layers on its stream (cudaStreamCaptureModeThreadLocal) and replays
// the graph every step; the state carries from one replay to the next, so a
// replay that reads a stale message or a stale sum shows in the result.
// Usage: mpirun -np N ./graph_replay [--n N] [--layers L] [--steps S]
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

struct Args {
    size_t n = 1 << 20;
    int layers = 4, steps = 20;
};

static Args parse(int argc, char **argv)
{
    Args a;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            a.n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--layers"))
            a.layers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            a.steps = atoi(argv[i + 1]);
    }
    return a;
}

__device__ __host__ inline float bias(int rank, size_t i) { return 0.01f * (float)(rank + 1) * (float)(1 + i % 5); }

__global__ void mix(float *h, size_t n, int rank)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = 0.25f * h[i] + bias(rank, i);
}

__global__ void average(float *h, const float *in, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = 0.5f * (h[i] + in[i]);
}

// EVOLVE-BLOCK-START
class Engine {
  public:
    Engine(ncclComm_t comm, int rank, int nranks, size_t n, int layers)
        : comm_(comm), rank_(rank), nranks_(nranks), n_(n), layers_(layers)
    {
        CK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        CK(cudaMalloc((void **)&hidden_, n * sizeof(float)));
        CK(cudaMalloc((void **)&incoming_, n * sizeof(float)));
        CK(cudaMalloc((void **)&shard_, n / nranks * sizeof(float)));
        CK(cudaMemset(hidden_, 0, n * sizeof(float)));
    }
    ~Engine()
    {
        if (exec_)
            CK(cudaGraphExecDestroy(exec_));
        CK(cudaFree(hidden_));
        CK(cudaFree(incoming_));
        CK(cudaFree(shard_));
        CK(cudaStreamDestroy(stream_));
    }
    // one step eagerly, before anything is captured
    void warm_up() { layers_on_stream(); }
    void capture()
    {
        cudaGraph_t graph;
        CK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        layers_on_stream();
        CK(cudaStreamEndCapture(stream_, &graph));
        CK(cudaGraphInstantiate(&exec_, graph, 0));
        CK(cudaGraphDestroy(graph));
    }
    void step() { CK(cudaGraphLaunch(exec_, stream_)); }
    void sync() { CK(cudaStreamSynchronize(stream_)); }
    const float *hidden() const { return hidden_; }

  private:
    void layers_on_stream()
    {
        const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
        for (int l = 0; l < layers_; l++) {
            mix<<<128, 256, 0, stream_>>>(hidden_, n_, rank_);
            NK(ncclGroupStart());
            NK(ncclSend(hidden_, n_, ncclFloat32, next, comm_, stream_));
            NK(ncclRecv(incoming_, n_, ncclFloat32, prev, comm_, stream_));
            NK(ncclGroupEnd());
            average<<<128, 256, 0, stream_>>>(hidden_, incoming_, n_);
            if (l % 2 == 0) {
                NK(ncclAllReduce(hidden_, hidden_, n_, ncclFloat32, ncclSum, comm_, stream_));
            } else {
                const size_t slice = n_ / nranks_;
                NK(ncclReduceScatter(hidden_, shard_, slice, ncclFloat32, ncclSum, comm_, stream_));
                NK(ncclAllGather(shard_, hidden_, slice, ncclFloat32, comm_, stream_));
            }
        }
    }
    ncclComm_t comm_;
    int rank_, nranks_;
    size_t n_;
    int layers_;
    cudaStream_t stream_;
    float *hidden_ = nullptr, *incoming_ = nullptr, *shard_ = nullptr;
    cudaGraphExec_t exec_ = nullptr;
};
// EVOLVE-BLOCK-END

// every rank's hidden state on the host, in double, through `layers` layers
static void reference_layers(std::vector<std::vector<double>> &h, int layers)
{
    int nranks = (int)h.size();
    size_t n = h[0].size();
    for (int l = 0; l < layers; l++) {
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < n; i++)
                h[r][i] = 0.25 * h[r][i] + bias(r, i);
        std::vector<std::vector<double>> in(nranks);
        for (int r = 0; r < nranks; r++)
            in[r] = h[(r + nranks - 1) % nranks];
        std::vector<double> sum(n, 0.0);
        for (int r = 0; r < nranks; r++)
            for (size_t i = 0; i < n; i++)
                sum[i] += 0.5 * (h[r][i] + in[r][i]);
        for (int r = 0; r < nranks; r++)
            h[r] = sum;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, ndev = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(rank % ndev));
    Args a = parse(argc, argv);
    a.n -= a.n % nranks; // the reduce-scatter's shards are equal
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));

    int bad = 0;
    {
        Engine e(comm, rank, nranks, a.n, a.layers);
        e.warm_up();
        e.capture();
        const int checked = 3;
        for (int s = 0; s < checked; s++)
            e.step();
        e.sync();
        std::vector<float> got(a.n);
        CK(cudaMemcpy(got.data(), e.hidden(), a.n * sizeof(float), cudaMemcpyDeviceToHost));
        std::vector<std::vector<double>> h(nranks, std::vector<double>(a.n, 0.0));
        reference_layers(h, a.layers * (1 + checked));
        for (size_t i = 0; i < a.n; i++)
            bad += std::fabs(got[i] - h[rank][i]) > 1e-4 * std::fmax(1.0, std::fabs(h[rank][i]));
        int all = 0;
        MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rank == 0)
            printf("Verification: %s\n", all ? "FAIL replayed state differs from the reference" : "PASS");
        bad = all;

        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = std::chrono::steady_clock::now();
        for (int s = 0; s < a.steps; s++)
            e.step();
        e.sync();
        double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / a.steps;
        if (rank == 0)
            printf("CUCO_RESULT {\"time_ms\": %.6f, \"steps\": %d}\n", ms, a.steps);
    }
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad != 0;
}
