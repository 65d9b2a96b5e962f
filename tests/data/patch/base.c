/* base.c: a program for the patch engine tests. */
#include <stdio.h>

// EVOLVE-BLOCK-START
#define CUCO_BLOCK 8 // cuco:knob 8 16 32
static int work(int x)
{
    int y = x * 2;
    return y + 1;
}
// EVOLVE-BLOCK-END

int main(void)
{
    printf("%d\n", work(3));
    return 0;
}
