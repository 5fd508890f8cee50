/* S3-compatible object storage (AWS S3, MinIO, ...) over libcurl with AWS Signature Version 4.
 *
 * Objects live at path-style URLs, {S3_ENDPOINT}/{S3_BUCKET}/{key}, and every request is
 * signed with S3_ACCESS_KEY_ID / S3_SECRET_ACCESS_KEY for S3_REGION (all five settings are
 * required; a call made without them fails with an error naming the missing one). Keys are
 * 1 to 1024 bytes of UTF-8 and may contain '/'. Network errors and 5xx answers are retried
 * twice; each attempt has a 5 s connect and a 60 s total timeout.
 *
 * The calls are blocking and thread-safe once curl_global_init() has run (main does it). */
#ifndef EXT_S3_H
#define EXT_S3_H
#include <stdbool.h>
#include <stddef.h>

/* Longest object key, in bytes (the S3 limit). */
#define S3_KEY_MAX 1024

/* Uploads the file at path as object key with the given Content-Type (NULL or "" means
 * application/octet-stream; at most 127 bytes, no control characters, so that s3_get can
 * return it whole), replacing any object of that name. The file is read twice,
 * once to hash it and once to send it, never held in memory whole; it must not change
 * during the call. Returns false with a reason in err when the file cannot be read or the
 * store refused or could not be reached. */
bool s3_put_file(const char *key, const char *path, const char *content_type, char err[256]);

/* Downloads object key into a new heap buffer: *data (free() it) holds *len bytes plus a
 * terminating NUL, and content_type the object's Content-Type ("" when the store sent none).
 * On failure returns false with *data NULL, a reason in err, and *not_found true exactly when
 * the object does not exist (a 404 other than for a missing bucket). Objects over 1 GiB, or
 * more than memory allows, fail rather than abort the process. */
bool s3_get(const char *key, char **data, size_t *len, char content_type[128], bool *not_found, char err[256]);

/* Calls fn(ctx, key, size) for every object of the bucket whose key starts with prefix ("" for
 * all), in key order (ListObjectsV2, a page of up to 1,000 at a time); fn returns false to stop,
 * which fails the call. False with err when the store refused or could not be reached. */
typedef bool (*s3_list_fn)(void *ctx, const char *key, long long size);
bool s3_list(const char *prefix, s3_list_fn fn, void *ctx, char err[256]);

/* Deletes object key. Deleting a key that does not exist succeeds (as on S3). Returns false
 * with a reason in err when the store refused or could not be reached. */
bool s3_delete(const char *key, char err[256]);

/* Makes the calling thread's next calls use bucket instead of S3_BUCKET (same endpoint and
 * credentials; NULL: S3_BUCKET again), for backups to s3://bucket/prefix. bucket must outlive
 * the calls. */
void s3_use_bucket(const char *bucket);

/* One request header taking part in the signature: a lowercase name and its value. */
typedef struct s3_header {
  const char *name;
  const char *value;
} s3_header;

/* AWS Signature Version 4 for service "s3": writes the Authorization header value
 * ("AWS4-HMAC-SHA256 Credential=...,SignedHeaders=...,Signature=...") into out.
 * canonical_uri is already URI-encoded ("/bucket/key"), canonical_query already in canonical
 * form ("" for none), amz_date is "YYYYMMDDTHHMMSSZ", payload_sha256_hex the lowercase hex
 * SHA-256 of the body. headers are the n signed headers in any order (they are sorted; values
 * are trimmed and inner runs of spaces collapsed); they must include host,
 * x-amz-content-sha256 and x-amz-date with the values actually sent. Pure function. */
void s3_sigv4_sign(const char *method, const char *canonical_uri, const char *canonical_query, const s3_header *headers,
                   size_t n, const char *amz_date, const char *payload_sha256_hex, const char *region,
                   const char *access_key, const char *secret_key, char out[512]);

/* s3_sigv4_sign over exactly the headers host, x-amz-content-sha256 (= payload_sha256_hex)
 * and x-amz-date (= amz_date). Exposed for unit tests. Pure function. */
void s3_sigv4_authorization(const char *method, const char *canonical_uri, const char *canonical_query,
                            const char *host, const char *amz_date /* YYYYMMDDTHHMMSSZ */,
                            const char *payload_sha256_hex, const char *region, const char *access_key,
                            const char *secret_key, char out[512]);

/* URI-encodes an object key for a URL path and the canonical URI, as SigV4 for S3 wants it:
 * every byte except A-Z a-z 0-9 - . _ ~ and '/' becomes %XX (uppercase hex), so "a b/ü"
 * is "a%20b/%C3%BC". out needs 3 * strlen(key) + 1 bytes; returns false (out "") when cap is
 * smaller. Pure function. */
bool s3_uri_encode_key(const char *key, char *out, size_t cap);

#endif
