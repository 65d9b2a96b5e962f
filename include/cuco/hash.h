/* hash.h: content hashes (xxHash3 64-bit) used to key programs and
 * evaluations. The hex form is 16 lowercase hex digits. */
#ifndef CUCO_HASH_H
#define CUCO_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t cuco_hash64(const void *data, size_t n);
/* Writes 16 hex digits and a NUL into out (17 bytes). */
void cuco_hash_hex(const void *data, size_t n, char out[17]);

#endif
