/* tensor_struct.cu: a data-parallel step written against a tiny framework
 * tensor abstraction, the way PyTorch extensions and small inference engines
 * do it: a Tensor carries a raw device pointer, an element count and a dtype,
 * empty()/release() own the memory, and collectives take Tensors and map the
 * dtype to NCCL with a switch. Each step makes the gradient, all-reduces it
 * in place, runs an independent forward kernel and applies the update; then
 * it all-gathers a shard into a full tensor, runs another independent kernel
 * and accumulates the gathered tensor. */
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CUDACHECK(cmd)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (cmd);                                                                    \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d CUDA %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

#define NCCLCHECK(cmd)                                                                             \
    do {                                                                                           \
        ncclResult_t r_ = (cmd);                                                                   \
        if (r_ != ncclSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d NCCL %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));   \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

namespace mini {

enum class DType { F32, F16, BF16 };

inline size_t dtype_size(DType t)
{
    switch (t) {
    case DType::F32:
        return 4;
    case DType::F16:
    case DType::BF16:
        return 2;
    }
    return 0;
}

struct Tensor {
    void *data = nullptr;
    size_t numel = 0;
    DType dtype = DType::F32;
    size_t bytes() const { return numel * dtype_size(dtype); }
    template <class T> T *ptr() const { return static_cast<T *>(data); }
};

Tensor empty(size_t n, DType t)
{
    Tensor x;
    x.numel = n;
    x.dtype = t;
    CUDACHECK(cudaMalloc(&x.data, x.bytes()));
    return x;
}

void release(Tensor &t)
{
    if (t.data)
        CUDACHECK(cudaFree(t.data));
    t.data = nullptr;
    t.numel = 0;
}

ncclDataType_t to_nccl(DType t)
{
    switch (t) {
    case DType::F32:
        return ncclFloat32;
    case DType::F16:
        return ncclFloat16;
    case DType::BF16:
        return ncclBfloat16;
    }
    return ncclFloat32;
}

void all_reduce_(Tensor &t, ncclComm_t c, cudaStream_t s)
{
    NCCLCHECK(ncclAllReduce(t.data, t.data, t.numel, to_nccl(t.dtype), ncclSum, c, s));
}

void all_gather(const Tensor &in, Tensor &out, ncclComm_t c, cudaStream_t s)
{
    NCCLCHECK(ncclAllGather(in.data, out.data, in.numel, to_nccl(in.dtype), c, s));
}

} // namespace mini

using mini::DType;
using mini::Tensor;

static int grid_for(size_t n)
{
    size_t b = (n + 255) / 256;
    return b > 1024 ? 1024 : (int)b;
}

static float grad_value(size_t i, int rank, int step)
{
    return (float)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) / 64.0f;
}

static float shard_value(size_t i, int rank, int step)
{
    return (float)((i * 3 + (size_t)rank * 11 + (size_t)step * 2) % 23) / 16.0f;
}

#define GRID_LOOP(i, n)                                                                            \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n);                        \
         i += (size_t)gridDim.x * blockDim.x)

template <class T> __global__ void fill_pattern(T *p, size_t n)
{
    GRID_LOOP(i, n) p[i] = (T)((float)(i % 29) / 8.0f);
}

template <class T> __global__ void fill_zero(T *p, size_t n)
{
    GRID_LOOP(i, n) p[i] = (T)0.0f;
}

template <class T> __global__ void make_grad(T *g, size_t n, int rank, int step)
{
    GRID_LOOP(i, n) g[i] = (T)((float)((i * 7 + (size_t)rank * 13 + (size_t)step * 5) % 17) / 64.0f);
}

template <class T> __global__ void make_shard(T *s, size_t n, int rank, int step)
{
    GRID_LOOP(i, n) s[i] = (T)((float)((i * 3 + (size_t)rank * 11 + (size_t)step * 2) % 23) / 16.0f);
}

template <class T> __global__ void forward(const T *x, T *act, size_t m, int rounds)
{
    GRID_LOOP(i, m)
    {
        float v = (float)x[i], a = 0.0f;
        for (int r = 0; r < rounds; r++)
            a = fmaf(a, 0.5f, v);
        act[i] = (T)a;
    }
}

template <class T> __global__ void sgd(T *p, const T *g, size_t n, float lr)
{
    GRID_LOOP(i, n) p[i] = (T)((float)p[i] - lr * (float)g[i]);
}

template <class T> __global__ void accumulate(T *acc, const T *x, size_t n)
{
    GRID_LOOP(i, n) acc[i] = (T)((float)acc[i] + (float)x[i]);
}

struct Model {
    ncclComm_t comm;
    cudaStream_t stream;
    int rank = 0, nranks = 1;
    size_t n = 0, m = 0;
    int rounds = 64;
    Tensor params, grad, input, act, act2, shard, full, acc;

    void setup(size_t n_, size_t m_, DType dt)
    {
        n = n_;
        m = m_;
        params = mini::empty(n, dt);
        grad = mini::empty(n, dt);
        input = mini::empty(m, dt);
        act = mini::empty(m, dt);
        act2 = mini::empty(m, dt);
        shard = mini::empty(n, dt);
        full = mini::empty(n * (size_t)nranks, dt);
        acc = mini::empty(n * (size_t)nranks, dt);
        fill_pattern<float><<<grid_for(m), 256, 0, stream>>>(input.ptr<float>(), m);
    }

    void reset()
    {
        fill_pattern<float><<<grid_for(n), 256, 0, stream>>>(params.ptr<float>(), n);
        fill_zero<float><<<grid_for(acc.numel), 256, 0, stream>>>(acc.ptr<float>(), acc.numel);
    }

    void step(int k)
    {
        make_grad<float><<<grid_for(n), 256, 0, stream>>>(grad.ptr<float>(), n, rank, k);
        mini::all_reduce_(grad, comm, stream);
        forward<float><<<grid_for(m), 256, 0, stream>>>(input.ptr<float>(), act.ptr<float>(), m, rounds);
        sgd<float><<<grid_for(n), 256, 0, stream>>>(params.ptr<float>(), grad.ptr<float>(), n, 0.01f);

        make_shard<float><<<grid_for(n), 256, 0, stream>>>(shard.ptr<float>(), n, rank, k);
        mini::all_gather(shard, full, comm, stream);
        forward<float><<<grid_for(m), 256, 0, stream>>>(act.ptr<float>(), act2.ptr<float>(), m, rounds);
        accumulate<float><<<grid_for(full.numel), 256, 0, stream>>>(acc.ptr<float>(), full.ptr<float>(), full.numel);
    }

    void teardown()
    {
        mini::release(params);
        mini::release(grad);
        mini::release(input);
        mini::release(act);
        mini::release(act2);
        mini::release(shard);
        mini::release(full);
        mini::release(acc);
        NCCLCHECK(ncclCommDestroy(comm));
    }

    int count_wrong(int steps)
    {
        std::vector<float> hp(n), ha(acc.numel);
        CUDACHECK(cudaMemcpy(hp.data(), params.data, params.bytes(), cudaMemcpyDeviceToHost));
        CUDACHECK(cudaMemcpy(ha.data(), acc.data, acc.bytes(), cudaMemcpyDeviceToHost));
        int wrong = 0;
        size_t stride = n > 4096 ? n / 1024 : 1;
        for (size_t i = 0; i < n; i += stride) {
            double want = (double)(i % 29) / 8.0;
            for (int k = 0; k < steps; k++) {
                double sum = 0.0;
                for (int r = 0; r < nranks; r++)
                    sum += grad_value(i, r, k);
                want -= 0.01 * sum;
            }
            if (std::fabs(hp[i] - want) > 1e-3 * (1.0 + std::fabs(want)))
                wrong++;
            for (int r = 0; r < nranks; r++) {
                double w = 0.0;
                for (int k = 0; k < steps; k++)
                    w += shard_value(i, r, k);
                float got = ha[(size_t)r * n + i];
                if (std::fabs(got - w) > 1e-3 * (1.0 + std::fabs(w)))
                    wrong++;
            }
        }
        return wrong;
    }
};

int main(int argc, char **argv)
{
    int steps = 3;
    size_t n = 4099, m = 8192;
    int rounds = 64;
    MPI_Init(&argc, &argv);
    Model mdl;
    MPI_Comm_rank(MPI_COMM_WORLD, &mdl.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mdl.nranks);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--n"))
            n = (size_t)std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--m"))
            m = (size_t)std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--steps"))
            steps = std::atoi(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--rounds"))
            rounds = std::atoi(argv[i + 1]);
    }
    mdl.rounds = rounds;

    int ndev = 1;
    CUDACHECK(cudaGetDeviceCount(&ndev));
    CUDACHECK(cudaSetDevice(mdl.rank % ndev));
    ncclUniqueId id;
    if (mdl.rank == 0)
        NCCLCHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    NCCLCHECK(ncclCommInitRank(&mdl.comm, mdl.nranks, id, mdl.rank));
    CUDACHECK(cudaStreamCreate(&mdl.stream));

    mdl.setup(n, m, DType::F32);
    mdl.reset();
    for (int k = 0; k < steps; k++)
        mdl.step(k);
    CUDACHECK(cudaStreamSynchronize(mdl.stream));
    int wrong = mdl.count_wrong(steps);

    mdl.reset();
    cudaEvent_t a, b;
    CUDACHECK(cudaEventCreate(&a));
    CUDACHECK(cudaEventCreate(&b));
    MPI_Barrier(MPI_COMM_WORLD);
    CUDACHECK(cudaEventRecord(a, mdl.stream));
    for (int k = 0; k < steps; k++)
        mdl.step(k);
    CUDACHECK(cudaEventRecord(b, mdl.stream));
    CUDACHECK(cudaEventSynchronize(b));
    float ms = 0.0f;
    CUDACHECK(cudaEventElapsedTime(&ms, a, b));
    CUDACHECK(cudaStreamSynchronize(mdl.stream));
    wrong += mdl.count_wrong(steps);

    int all = 0;
    MPI_Allreduce(&wrong, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (mdl.rank == 0) {
        if (all == 0)
            std::printf("Verification: PASS\n");
        else
            std::printf("Verification: FAIL %d values wrong\n", all);
        std::printf("CUCO_RESULT {\"time_ms\": %.6f, \"iters\": %d}\n", ms / steps, steps);
    }
    CUDACHECK(cudaEventDestroy(a));
    CUDACHECK(cudaEventDestroy(b));
    mdl.teardown();
    CUDACHECK(cudaStreamDestroy(mdl.stream));
    MPI_Finalize();
    return 0;
}
