/* Hashes and MACs over OpenSSL. Thread-safe. */
#ifndef EXT_DIGEST_H
#define EXT_DIGEST_H
#include <stdbool.h>
#include <stddef.h>

/* Lowercase hex SHA-256 of data; out needs 65 bytes. */
void sha256_hex(const void *data, size_t len, char out[65]);
/* A new secret for a link, a ticket or a session: 256 random bits as 64 lowercase hex digits,
 * and its SHA-256 in hex (what is stored, so a leaked table opens nothing); each needs 65 bytes. */
void secret_new_hex(char secret[65], char hash[65]);
/* Lowercase hex SHA-256 of the file at path, read in pieces; false when it cannot be read. */
bool sha256_file_hex(const char *path, char out[65]);
/* Lowercase hex HMAC-SHA256; out needs 65 bytes. */
void hmac_sha256_hex(const void *key, size_t keylen, const void *data, size_t len, char out[65]);
/* A key for one purpose, derived from JWT_SECRET: the lowercase hex HMAC-SHA256 of label under
 * the secret (64 characters; out needs 65 bytes), so no two uses of the secret share a key. */
void secret_derive_hex(const char *label, char out[65]);
/* Constant-time comparison of two NUL-terminated strings of equal expected length. */
bool digest_equal(const char *a, const char *b);

#endif
