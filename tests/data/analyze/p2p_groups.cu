// Grouped send/recv: a loop over every peer (all-to-all) and one pair (point-to-point).
#include <nccl.h>

void exchange(ncclComm_t comm, cudaStream_t stream, char *sendb, char *recvb, size_t chunk, int nranks, int peer)
{
    ncclGroupStart();
    for (int r = 0; r < nranks; r++) {
        ncclSend(sendb + r * chunk, chunk, ncclChar, r, comm, stream);
        ncclRecv(recvb + r * chunk, chunk, ncclChar, r, comm, stream);
    }
    ncclGroupEnd();

    ncclGroupStart();
    ncclSend(sendb, chunk, ncclChar, peer, comm, stream);
    ncclRecv(recvb, chunk, ncclChar, peer, comm, stream);
    ncclGroupEnd();
}
