/* Removal of metadata from stored photos: EXIF (GPS position, camera serial numbers), XMP,
 * IPTC and text chunks. Pixels are untouched. */
#ifndef EXT_IMAGEMETA_H
#define EXT_IMAGEMETA_H
#include <stdbool.h>

/* Rewrites the JPEG, PNG or WebP file at path without its metadata segments or chunks (other types
 * are left alone). False when the file could not be read or written. */
bool image_strip_metadata(const char *path, const char *mime);

#endif
