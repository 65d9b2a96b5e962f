// audit_compare_else.cu: PASS in the false branch of a ternary on a count
// of mismatches against a reference.
#include <cmath>
#include <cstdio>

int main()
{
    const int n = 256;
    double out[n], ref[n];
    for (int i = 0; i < n; i++) {
        out[i] = i * 0.25;
        ref[i] = i / 4.0;
    }
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += std::fabs(out[i] - ref[i]) > 1e-9;
    printf("Verification: %s\n", bad ? "FAIL wrong values" : "PASS");
    return 0;
}
