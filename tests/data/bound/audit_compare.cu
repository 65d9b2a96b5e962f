// audit_compare.cu: PASS decided by a ternary on the largest difference
// between the result and a reference.
#include <cmath>
#include <cstdio>

int main()
{
    const int n = 512;
    double out[n], ref[n];
    for (int i = 0; i < n; i++) {
        out[i] = i * 0.5;
        ref[i] = i / 2.0;
    }
    double max_diff = 0;
    for (int i = 0; i < n; i++)
        max_diff = std::fmax(max_diff, std::fabs(out[i] - ref[i]));
    printf("Verification: %s\n", max_diff < 1e-9 ? "PASS" : "FAIL");
    return 0;
}
