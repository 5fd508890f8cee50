/* Smaller copies of photos, made with libvips (Debian's libvips): the WebP variants that
 * phones show instead of a 10 MB original (ext/storage.h decides which sizes and stores them).
 *
 * libvips runs with one worker thread per operation and no operation cache, so one variant
 * costs one core and memory bounded by the image's strip, never a cache that grows with
 * traffic; images over THUMBNAIL_MAX_PIXELS are not decoded at all. Only the PNG, JPEG and
 * WebP loaders are used (the others, libvips's "untrusted" ones, are blocked). Thread-safe;
 * libvips is in the media library, loaded and started by the first call (ext/media.h), and
 * stopped by media_fini. */
#ifndef EXT_THUMBNAIL_H
#define EXT_THUMBNAIL_H
#include <stdbool.h>

/* A decoding bomb (a 10 MB PNG of 30,000 x 30,000 pixels) gets no variants. */
#define THUMBNAIL_MAX_PIXELS (100LL * 1000 * 1000)

/* The pixel size of the image at path from its header (no decoding). False when it cannot be
 * read (or libvips cannot start). */
bool thumbnail_size(const char *path, int *width, int *height);
/* Writes the image at path scaled to exactly width x height as a WebP file at out_path
 * (quality 80, no metadata). False with a reason in err when it cannot. */
bool thumbnail_webp(const char *path, int width, int height, const char *out_path, char err[256]);

#endif
