/*
 * plugin_allgather.cu: sequence-parallel all-gather behind an inference
 * plugin interface.
 *
 * AllGatherPlugin is written like an inference-engine plugin: it is built
 * with a rank group and a data type, initialize() creates (or reuses) the
 * communicator of the group, kept as a std::shared_ptr<ncclComm_t> whose
 * deleter destroys it, and enqueue(inputs, outputs, workspace, stream) takes
 * arrays of tensor pointers and issues ncclAllGather with the NCCL type mapped
 * from the plugin's own enum. Each rank normalizes its slice of the tokens,
 * the plugin gathers the slices, and a kernel sums every token's features
 * over the whole sequence.
 *
 * Check: the host recomputes the gathered activations and the sums.
 *
 * mpirun -np N ./plugin_allgather [tokens_per_rank] [iters] [timed_iters]
 */
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <vector>

#define NCCLCHECK(cmd)                                                                    \
    do {                                                                                  \
        ncclResult_t r = cmd;                                                             \
        if (r != ncclSuccess) {                                                           \
            printf("Failed, NCCL error %s:%d '%s'\n", __FILE__, __LINE__,                 \
                   ncclGetErrorString(r));                                                \
            exit(EXIT_FAILURE);                                                           \
        }                                                                                 \
    } while (0)
#define CUDA_CHECK(stat)                                                                  \
    do {                                                                                  \
        cudaError_t e_ = (stat);                                                          \
        if (e_ != cudaSuccess) {                                                          \
            printf("[ERROR] CUDA runtime error: %s %s:%d\n", cudaGetErrorString(e_),      \
                   __FILE__, __LINE__);                                                   \
            exit(EXIT_FAILURE);                                                           \
        }                                                                                 \
    } while (0)

namespace plugins {

enum class DataType { kFLOAT, kHALF };

inline ncclDataType_t toNcclType(DataType type)
{
    switch (type) {
    case DataType::kHALF: return ncclHalf;
    case DataType::kFLOAT:
    default: return ncclFloat;
    }
}

inline size_t elementSize(DataType type) { return type == DataType::kHALF ? 2 : 4; }

class AllGatherPlugin {
  public:
    AllGatherPlugin(std::set<int> group, DataType type, size_t count) : mGroup(std::move(group)), mType(type), mCount(count) {}

    int initialize()
    {
        int rank = 0, size = 0;
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm_size(MPI_COMM_WORLD, &size);
        auto it = mCommMap.find(mGroup);
        if (it != mCommMap.end()) {
            mNcclComm = it->second;
            return 0;
        }
        ncclUniqueId id;
        if (rank == *mGroup.begin())
            NCCLCHECK(ncclGetUniqueId(&id));
        MPI_Bcast(&id, sizeof(id), MPI_BYTE, *mGroup.begin(), MPI_COMM_WORLD);
        auto *comm = new ncclComm_t;
        NCCLCHECK(ncclCommInitRank(comm, (int)mGroup.size(), id, rank));
        mNcclComm = std::shared_ptr<ncclComm_t>(comm, [](ncclComm_t *c) {
            ncclCommDestroy(*c);
            delete c;
        });
        mCommMap[mGroup] = mNcclComm;
        return 0;
    }

    void terminate()
    {
        mNcclComm.reset();
        mCommMap.clear();
    }

    int enqueue(const void *const *inputs, void *const *outputs, void *workspace, cudaStream_t stream) const
    {
        (void)workspace;
        NCCLCHECK(ncclAllGather(inputs[0], outputs[0], mCount, toNcclType(mType), *mNcclComm, stream));
        return 0;
    }

  private:
    std::set<int> mGroup;
    DataType mType;
    size_t mCount;
    std::shared_ptr<ncclComm_t> mNcclComm;
    static std::map<std::set<int>, std::shared_ptr<ncclComm_t>> mCommMap;
};

std::map<std::set<int>, std::shared_ptr<ncclComm_t>> AllGatherPlugin::mCommMap;

} // namespace plugins

static const int kHidden = 256;

__host__ __device__ inline float raw_value(int token, int f) { return (float)((token * 11 + f * 7) % 31) - 15.0f; }

/* each token's features scaled to unit maximum, stored as half */
__global__ void normalize_slice(__half *out, int first_token, int tokens)
{
    int t = blockIdx.x;
    if (t >= tokens)
        return;
    float m = 1.0f;
    for (int f = 0; f < kHidden; f++)
        m = fmaxf(m, fabsf(raw_value(first_token + t, f)));
    for (int f = threadIdx.x; f < kHidden; f += blockDim.x)
        out[(size_t)t * kHidden + f] = __float2half(raw_value(first_token + t, f) / m);
}

__global__ void feature_sums(const __half *all, float *sums, int tokens)
{
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= kHidden)
        return;
    float acc = 0.0f;
    for (int t = 0; t < tokens; t++)
        acc += __half2float(all[(size_t)t * kHidden + f]);
    sums[f] = acc;
}

static void layer(const plugins::AllGatherPlugin &plugin, __half *slice, __half *gathered, float *sums, int rank,
                  int nranks, int tokens, cudaStream_t stream)
{
    normalize_slice<<<tokens, 128, 0, stream>>>(slice, rank * tokens, tokens);
    const void *inputs[] = {slice};
    void *outputs[] = {gathered};
    plugin.enqueue(inputs, outputs, nullptr, stream);
    feature_sums<<<(kHidden + 127) / 128, 128, 0, stream>>>(gathered, sums, tokens * nranks);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int tokens = argc > 1 ? atoi(argv[1]) : 2048;
    int iters = argc > 2 ? atoi(argv[2]) : 2;
    int timed = argc > 3 ? atoi(argv[3]) : 10;
    int ndev = 0;
    CUDA_CHECK(cudaGetDeviceCount(&ndev));
    CUDA_CHECK(cudaSetDevice(rank % ndev));

    std::set<int> group;
    for (int r = 0; r < nranks; r++)
        group.insert(r);
    size_t slice_elems = (size_t)tokens * kHidden;
    plugins::AllGatherPlugin plugin(group, plugins::DataType::kHALF, slice_elems);
    plugin.initialize();

    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreate(&stream));
    __half *d_slice, *d_gathered;
    float *d_sums;
    CUDA_CHECK(cudaMalloc(&d_slice, slice_elems * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&d_gathered, slice_elems * nranks * sizeof(__half)));
    CUDA_CHECK(cudaMalloc(&d_sums, kHidden * sizeof(float)));
    for (int it = 0; it < iters; it++)
        layer(plugin, d_slice, d_gathered, d_sums, rank, nranks, tokens, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));

    std::vector<float> sums(kHidden), ref(kHidden, 0.0f);
    CUDA_CHECK(cudaMemcpy(sums.data(), d_sums, kHidden * sizeof(float), cudaMemcpyDeviceToHost));
    for (int t = 0; t < tokens * nranks; t++) {
        float m = 1.0f;
        for (int f = 0; f < kHidden; f++)
            m = std::max(m, fabsf(raw_value(t, f)));
        for (int f = 0; f < kHidden; f++)
            ref[f] += __half2float(__float2half(raw_value(t, f) / m));
    }
    long bad = 0;
    for (int f = 0; f < kHidden; f++)
        if (fabsf(sums[f] - ref[f]) > 1e-3f * std::max(1.0f, fabsf(ref[f])))
            bad++;
    long bad_all = 0;
    MPI_Allreduce(&bad, &bad_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    cudaEvent_t t0, t1;
    CUDA_CHECK(cudaEventCreate(&t0));
    CUDA_CHECK(cudaEventCreate(&t1));
    std::vector<float> times;
    for (int it = 0; it < timed + 2; it++) {
        CUDA_CHECK(cudaEventRecord(t0, stream));
        layer(plugin, d_slice, d_gathered, d_sums, rank, nranks, tokens, stream);
        CUDA_CHECK(cudaEventRecord(t1, stream));
        CUDA_CHECK(cudaEventSynchronize(t1));
        float ms = 0.0f;
        CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
        if (it >= 2)
            times.push_back(ms);
    }
    std::sort(times.begin(), times.end());
    if (rank == 0) {
        if (bad_all == 0)
            printf("Verification: PASS\n");
        else
            printf("Verification: FAIL %ld feature sums differ from the host\n", bad_all);
        printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d, \"tokens\": %d}\n",
               times.empty() ? 0.0 : (double)times[times.size() / 2], timed, tokens * nranks);
    }
    CUDA_CHECK(cudaEventDestroy(t0));
    CUDA_CHECK(cudaEventDestroy(t1));
    CUDA_CHECK(cudaFree(d_sums));
    CUDA_CHECK(cudaFree(d_gathered));
    CUDA_CHECK(cudaFree(d_slice));
    CUDA_CHECK(cudaStreamDestroy(stream));
    plugin.terminate();
    MPI_Finalize();
    return bad_all != 0;
}
