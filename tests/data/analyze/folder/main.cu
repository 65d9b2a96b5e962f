// A program split over files: the collective lives in a local header.
#include "comm_step.cuh"
int main() { float *x; cudaMalloc(&x, 16); run_step(x); return 0; }
