// audit_ternary_other.cu: PASS is an argument of its own beside a ternary on
// the rank: printed whatever the results are.
#include <cstdio>

int main(int argc, char **argv)
{
    int rank = argc > 1;
    (void)argv;
    printf("rank %s Verification: %s\n", rank == 0 ? "zero" : "other", "PASS");
    return 0;
}
