/* Removal of metadata from stored photos: EXIF (GPS position, camera serial numbers), XMP,
 * IPTC and text chunks. Pixels are untouched. */
#ifndef EXT_IMAGEMETA_H
#define EXT_IMAGEMETA_H
#include <stdbool.h>

typedef enum {
  IMAGE_META_OK,         /* stripped (or nothing to strip, or not an image type handled here) */
  IMAGE_META_UNREADABLE, /* the structure could not be followed: the file must not be kept */
  IMAGE_META_IO_ERROR,   /* the file could not be read or rewritten */
} image_meta_rc;

/* Rewrites the JPEG, PNG or WebP file at path without its metadata segments or chunks (other
 * types are left alone). Never leaves metadata in place silently: a file whose structure it
 * cannot follow is reported IMAGE_META_UNREADABLE, unchanged. Thread-safe. */
image_meta_rc image_strip_metadata(const char *path, const char *mime);

#endif
