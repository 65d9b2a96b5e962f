// audit_early_return.cu: a failed comparison returns early; the PASS line
// that follows is reached only when every value matched.
#include <cmath>
#include <cstdio>

int main()
{
    const int n = 64;
    float v[n], r[n];
    for (int i = 0; i < n; i++)
        v[i] = r[i] = 1.0f / (i + 1);
    for (int i = 0; i < n; i++) {
        if (std::fabs(v[i] - r[i]) > 1e-6f) {
            printf("Verification: FAIL at %d\n", i);
            return 1;
        }
    }
    printf("Verification: PASS\n");
    return 0;
}
