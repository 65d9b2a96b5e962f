// audit_unconditional.cu: the results are compared, but PASS is printed
// whatever the comparison found. The static audit must flag it.
#include <cmath>
#include <cstdio>

int main()
{
    const int n = 1024;
    float a[n], b[n];
    for (int i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = (float)i * 1.0f;
    }
    int bad = 0;
    for (int i = 0; i < n; i++)
        if (std::fabs(a[i] - b[i]) > 1e-3f)
            bad++;
    printf("mismatches: %d\n", bad);
    printf("Verification: PASS\n");
    return 0;
}
