// peer_copy.cu: an all-gather of per-rank shards whose result is mirrored
// with cudaMemcpyPeer, a host-path copy between devices that the static
// check of the transformed program rejects; its error must cite this
// file's line, not a line of the generated program.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { if ((x) != cudaSuccess) { fprintf(stderr, "cuda failure line %d\n", __LINE__); return 1; } } while (0)
#define NK(x) do { if ((x) != ncclSuccess) { fprintf(stderr, "nccl failure line %d\n", __LINE__); return 1; } } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, dev = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CK(cudaSetDevice(rank));
    CK(cudaGetDevice(&dev));
    size_t n = argc > 1 ? strtoul(argv[1], nullptr, 10) : 1024;
    ncclUniqueId id;
    if (rank == 0)
        NK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclComm_t comm;
    NK(ncclCommInitRank(&comm, nranks, id, rank));
    std::vector<int> h(n, rank);
    int *shard, *all, *mirror;
    CK(cudaMalloc(&shard, n * sizeof(int)));
    CK(cudaMalloc(&all, n * nranks * sizeof(int)));
    CK(cudaMalloc(&mirror, n * nranks * sizeof(int)));
    CK(cudaMemcpy(shard, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    NK(ncclAllGather(shard, all, n, ncclInt32, comm, 0));
    CK(cudaMemcpyPeer(mirror, dev, all, dev, n * nranks * sizeof(int)));
    std::vector<int> got(n * nranks);
    CK(cudaMemcpy(got.data(), mirror, got.size() * sizeof(int), cudaMemcpyDeviceToHost));
    int bad = 0;
    for (size_t i = 0; i < got.size(); i++)
        bad += got[i] != (int)(i / n);
    printf("Verification: %s\n", bad ? "FAIL" : "PASS");
    printf("CUCO_RESULT {\"time_ms\": 1.0, \"iters\": 1}\n");
    NK(ncclCommDestroy(comm));
    MPI_Finalize();
    return bad != 0;
}
