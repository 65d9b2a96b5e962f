/* proc_segv.c: test helper that dies of a segmentation fault (a store to an
 * address in the never-mapped first page). Under AddressSanitizer run it
 * with ASAN_OPTIONS=handle_segv=0 so the signal is not turned into an exit;
 * the address is not null so UndefinedBehaviorSanitizer's null check does
 * not catch it first. */
#include <stdint.h>
#include <stdio.h>

int main(void)
{
    printf("about to crash\n");
    fflush(stdout);
    volatile uintptr_t address = 64;
    *(volatile int *)address = 1;
    return 0;
}
