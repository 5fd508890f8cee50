/* Stored files (photos and documents): one interface, two backends chosen by configuration,
 * local files under $DATA_DIR/uploads (default) or S3-compatible object storage (S3_*).
 *
 * Keys are random ("<cuid>.<ext>"), never derived from a client's file name. Files are
 * reached only through signed URLs, {PUBLIC_URL}/files/<key>?expires=<unix>&sig=<hex>, where
 * sig is an HMAC over key and expiry under a key derived from JWT_SECRET. Thread-safe. */
#ifndef EXT_STORAGE_H
#define EXT_STORAGE_H
#include "core/jw.h"
#include "core/errors.h"
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORAGE_KEY_LEN 40
#define URL_TTL_PHOTO (365LL * 24 * 3600)  /* photos, logos, headshots: one year */
#define URL_TTL_DOCUMENT (15LL * 60)       /* licence and insurance documents: 15 minutes */
/* Expiries are rounded up to a boundary, so one file keeps one URL for a while and clients and
 * CDNs can cache it: the next full hour for links that live a day or more, the next 5 minutes
 * for shorter ones. */
#define URL_WINDOW_LONG 3600
#define URL_WINDOW_SHORT 300

/* Image variants. A PNG, JPEG or WebP stored by storage_save also gets WebP copies at
 * STORAGE_VARIANT_SMALL and STORAGE_VARIANT_LARGE pixels on its long side (the short side in
 * proportion), each only when smaller than the original: a 200-pixel image gets none, an
 * 800-pixel one the small one only. They are made at upload (libvips, ext/thumbnail.h) before
 * the original is stored, so an answer that names an original names its variants from then on,
 * and are deleted with it (storage_delete). Which variants a key has is read from the key
 * itself: its id keeps the original's size (and a check) in its last 12 characters, so no
 * answer needs a read to list them. A key stored before variants existed, a document or an
 * image libvips cannot read has none. */
#define STORAGE_VARIANT_SMALL 256
#define STORAGE_VARIANT_LARGE 1024
#define STORAGE_VARIANTS_MAX 2
#define STORAGE_VARIANT_MAX_SIDE 65535 /* a longer side gets no variants */

typedef struct storage_variant {
  int width, height;
  char key[STORAGE_KEY_LEN]; /* "<id>.webp", served like any key */
} storage_variant;

/* The variants stored with key, smallest first; 0 for a key that has none (NULL too). */
int storage_variants_of(const char *key, storage_variant out[STORAGE_VARIANTS_MAX]);
/* A new key with extension ext for an image of w x h pixels: one that names its variants when
 * it gets some (each variant's key distinct from it), else a random one as for any file (w and h
 * 0 for a file that is not an image). Exposed for unit tests. */
void storage_new_key(const char *ext, int w, int h, char key[STORAGE_KEY_LEN]);

/* "local" or "s3". */
const char *storage_mode(void);
/* Stores the file at tmp_path (consumed: moved or deleted) under a new key with extension ext;
 * writes the key. False with err on failure. */
bool storage_save(const char *tmp_path, const char *ext, const char *content_type, char key[STORAGE_KEY_LEN],
                  char err[256]);
/* Why the calling thread's last failed storage_save (since storage_failure_clear) failed:
 * ERR_INSUFFICIENT_STORAGE (no space left), ERR_UNAVAILABLE (object storage did not answer
 * or refused, the upload directory cannot be written), or ERR_OK when none failed. The server
 * turns a request's 500 into that status with a clear message. */
err_t storage_failure(void);
void storage_failure_clear(void);
/* Records a failure to write a file of an upload with errno e (ENOSPC: no space). */
void storage_failure_note(int e);
/* Removes a stored object; a missing one is not an error. */
bool storage_delete(const char *key);
/* True when key has the shape of a key this service makes (anything else is never looked up). */
bool storage_key_valid(const char *key);
/* Opens a stored object for serving: local files come back as an open fd (*fd >= 0, *size),
 * S3 objects as a heap buffer (*data, *size). *not_found on a missing object. */
bool storage_open(const char *key, int *fd, char **data, size_t *size, bool *not_found);
/* Copies a stored object to a local temporary file (for recognition); heap path for free()
 * and unlink(), NULL on failure. */
char *storage_fetch_to_temp(const char *key);

/* The expiry (unix seconds) of a link signed now for ttl_seconds: at least ttl_seconds from
 * the service clock, rounded up to the window's boundary. */
int64_t storage_url_expiry(int64_t ttl_seconds);
/* The signed URL of key, valid until storage_url_expiry(ttl_seconds) (heap, free()); the same
 * URL for the same key throughout a window. */
char *storage_url(const char *key, int64_t ttl_seconds);
/* The signed URL as a JSON string, or JSON null for a NULL key. New reference. */
json_t *storage_url_json(const char *key, int64_t ttl_seconds);
/* A JSON array text of keys (a database cell; NULL counts as empty) as an array of signed URLs. */
json_t *storage_urls_json(const char *keys_json, int64_t ttl_seconds);
/* The same two written into an answer: the signed URL of key as a string (null for NULL), and
 * a JSON array text of keys as an array of signed URLs ("[]" and NULL cost nothing). */
void storage_url_jw(jw *w, const char *key, int64_t ttl_seconds);
void storage_urls_jw(jw *w, const char *keys_json, int64_t ttl_seconds);
/* Links signed with a given expiry (storage_url_expiry), so one answer writes each file's link
 * and its variants' with one expiry: the original's link as a string (null for NULL), a JSON
 * array text of keys as an array of links, and the original's link into out (cap bytes; its
 * length returned, cap or more when it did not fit). */
void storage_url_jw_at(jw *w, const char *key, int64_t expires);
void storage_urls_jw_at(jw *w, const char *keys_json, int64_t expires);
size_t storage_url_at(const char *key, int64_t expires, char *out, size_t cap);
/* An answer's `variants` member: an object from each original's link (as written with
 * expires) to its variants, [{ "width", "height", "url", "contentType": "image/webp" }]
 * smallest first; originals without variants are left out, and so is the member when none has
 * any (storage_has_variants). Written member by member: open,
 * add each key (a key or a JSON array text of keys, as the cells hold them), close. */
void storage_variants_open(jw *w);
/* Whether a cell (a key or a JSON array text of keys) names an image with variants. */
bool storage_has_variants(const char *cell);
void storage_variants_add(jw *w, const char *cell, int64_t expires);
void storage_variants_close(jw *w);
/* The whole member for one cell (a key or a JSON array text of keys) linked with expires:
 * nothing when it has no variants. */
void storage_variants_jw(jw *w, const char *cell, int64_t expires);
/* The same member for an answer built as a jansson object: from the links of this service
 * among obj's string members and arrays of strings (each parsed for its key and expiry);
 * sets obj's "variants" when one has variants. */
void storage_variants_json_set(json_t *obj);

/* Checks a URL's expiry and signature against the service clock. */
bool storage_url_valid(const char *key, const char *expires, const char *sig);

#endif
