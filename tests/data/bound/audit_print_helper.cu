// audit_print_helper.cu: the success line is printed inside a reporting
// helper; the caller passes it the outcome of a comparison.
#include <cstdio>
#include <cstring>

static void report(bool ok)
{
    if (ok)
        puts("Verification: OK");
    else
        puts("Verification: FAIL");
}

int main()
{
    char got[16] = "abcdefgh", want[16] = "abcdefgh";
    report(memcmp(got, want, sizeof got) == 0);
    return 0;
}
