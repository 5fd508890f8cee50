/* File types from their bytes (libmagic), never from a declared type or a file name. */
#ifndef EXT_FILETYPE_H
#define EXT_FILETYPE_H
#include <stdbool.h>

/* Types a route may accept, as bits. */
enum { FT_PNG = 1, FT_JPEG = 2, FT_WEBP = 4, FT_PDF = 8 };
#define FT_IMAGES (FT_PNG | FT_JPEG | FT_WEBP)

typedef struct filetype {
  unsigned bit;     /* one FT_* bit, 0 when the type is none of them */
  const char *mime; /* "image/png", ..., or the sniffed MIME type of anything else */
  const char *ext;  /* "png", "jpg", "webp", "pdf"; "" for other types */
} filetype;

/* Loads the magic database (once, at start-up). False when unavailable. */
bool filetype_init(void);
/* Sniffs the file at path. Thread-safe. */
filetype filetype_of(const char *path);
/* The MIME type for a stored key's extension ("x.png" -> "image/png"); NULL when unknown. */
const char *filetype_mime_for_key(const char *key);
/* "PNG, JPEG or WebP image" style description of a set of bits, for error messages. */
const char *filetype_describe(unsigned bits);

#endif
