// Calls under if/else, do-while, nested single-statement loops, a lambda, a method, cudaLaunchKernel.
struct S { void go(ncclComm_t c, cudaStream_t s, float *x) const {
    if (x) ncclAllReduce(x, x, 1, ncclFloat, ncclSum, c, s);
    else NCCLCHECK(ncclBroadcast(x, x, 1, ncclFloat, 0, c, s));
    do { ncclAllGather(x, x, 1, ncclFloat, c, s); } while (0);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) ncclReduce(x, x, 1, ncclFloat, ncclSum, 0, c, s);
    ncclSend(x, 1, ncclFloat, 1, c, s);
    auto f = [&](int r) { ncclRecv(x, 1, ncclFloat, r, c, s); };
    void *args[] = {&x};
    cudaLaunchKernel((void *)kern, dim3(1), dim3(32), args, 0, s);
} };
