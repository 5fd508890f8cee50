/* A PDF of photos, one per page: how a dispute's photo evidence reaches the processor, which
 * takes one file per evidence field (Stripe's documents, 5 MB at most; a PDF holds many
 * pages). Leptonica reads PNG, JPEG and WebP; each photo is scaled down to PHOTOBOOK_MAX_SIDE
 * and encoded as JPEG. Thread-safe. */
#ifndef EXT_PHOTOBOOK_H
#define EXT_PHOTOBOOK_H
#include <stdbool.h>
#include <stddef.h>

#define PHOTOBOOK_MAX_SIDE 1600
#define PHOTOBOOK_MAX_PHOTOS 20

/* The PDF of the n images at paths (local files), titled title: heap bytes (free()) in *pdf,
 * *len of them. False with err (256 bytes) when an image cannot be read or the PDF made. */
bool photobook_make(const char *const *paths, int n, const char *title, unsigned char **pdf, size_t *len,
                    char err[256]);

#endif
