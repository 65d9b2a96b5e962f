/* proc_spew.c: test helper that writes a lot of output fast.
 * Usage: proc_spew BYTES [out|err|both]
 * Writes BYTES bytes to stdout (default), stderr, or to each of both
 * (alternating blocks, so a reader that drains only one stream deadlocks).
 * Byte i of a stream is PATTERN[i % 37], so a reader can check any part. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char PATTERN[] = "0123456789abcdefghijklmnopqrstuvwxyz\n"; /* 37 bytes */
#define PERIOD 37
#define BLOCK (PERIOD * 1771) /* ~64 KiB, a whole number of periods */

static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    unsigned long long total = strtoull(argv[1], NULL, 10);
    const char *which = argc > 2 ? argv[2] : "out";
    int to_out = strcmp(which, "err") != 0;
    int to_err = strcmp(which, "err") == 0 || strcmp(which, "both") == 0;
    static char block[BLOCK];
    for (size_t i = 0; i < BLOCK; i++)
        block[i] = PATTERN[i % PERIOD];
    for (unsigned long long done = 0; done < total;) {
        size_t n = total - done < BLOCK ? (size_t)(total - done) : BLOCK;
        if (to_out && write_all(1, block, n) != 0)
            return 1;
        if (to_err && write_all(2, block, n) != 0)
            return 1;
        done += n;
    }
    return 0;
}
