// audit_constant.cu: PASS is printed under a condition, but the condition is
// a flag that only ever holds a constant; the comparison's count is unused.
#include <cstdio>

int main()
{
    const int n = 256;
    int got[n], want[n];
    for (int i = 0; i < n; i++)
        got[i] = want[i] = i;
    bool ok = true;
    long errors = 0;
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            errors++;
    fprintf(stderr, "%ld errors\n", errors);
    if (ok)
        printf("Verification: PASS\n");
    else
        printf("Verification: FAIL\n");
    return 0;
}
