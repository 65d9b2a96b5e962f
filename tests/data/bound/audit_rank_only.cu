// audit_rank_only.cu: PASS printed by rank 0 under a condition that looks
// like a check but only tests the rank; nothing compares results.
#include <cstdio>
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    float sum = 0;
    for (int i = 0; i < 100; i++)
        sum += i;
    printf("rank %d sum %f\n", rank, sum);
    if (rank == 0)
        printf("Verification: PASS\n");
    MPI_Finalize();
    return 0;
}
