/* hash.c: xxHash3 content hashes for programs and evaluations. */
#include "cuco/hash.h"

#include <stdio.h>
#include <xxhash.h>

uint64_t cuco_hash64(const void *data, size_t n)
{
    return XXH3_64bits(data, n);
}

void cuco_hash_hex(const void *data, size_t n, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)cuco_hash64(data, n));
}
