/* Identifiers and randomness. Thread-safe. */
#ifndef CORE_IDS_H
#define CORE_IDS_H
#include <stddef.h>

#define ID_LEN 25
/* Writes a new cuid-style identifier: 'c' then 24 lowercase base-36 characters drawn from the
 * kernel's CSPRNG (never derived from time or order); out needs ID_LEN + 1 bytes. */
void id_new(char out[ID_LEN + 1]);
/* Fills buf with n cryptographically secure random bytes (aborts if the kernel refuses). */
void random_bytes(void *buf, size_t n);

#endif
