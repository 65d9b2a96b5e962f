// audit_helper.cu: success decided in a helper function that counts
// mismatches; main prints PASSED when the helper found none.
#include <cstdio>

static int count_mismatches(const float *have, const float *want, int n)
{
    int errors = 0;
    for (int i = 0; i < n; i++)
        if (have[i] != want[i])
            errors++;
    return errors;
}

int main()
{
    const int n = 128;
    float x[n], y[n];
    for (int i = 0; i < n; i++)
        x[i] = y[i] = (float)i;
    int errs = count_mismatches(x, y, n);
    if (errs == 0)
        printf("Test PASSED\n");
    else
        printf("Test FAILED: %d mismatches\n", errs);
    return errs != 0;
}
