void f(ncclComm_t c, cudaStream_t s, float *x)
{
    ncclAllReduce(x, x, 4, ncclFloat, ncclSum, c, s);
    const char *bad = "no end
    ncclAllReduce(x, x, 4, ncclFloat, ncclSum
/* never closed
