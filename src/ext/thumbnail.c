/* libvips behind thumbnail.h, in the media library (ext/media.h). libvips starts with the
 * first call (once per process) and stops at media_fini. vips_thumbnail loads through the
 * shrink-on-load paths (a JPEG is decoded at 1/2, 1/4 or 1/8 of its size when that is enough),
 * and the variants are made largest first so the smaller ones start from a small WebP instead
 * of the original. */
#include "ext/media.h"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <vips/vips.h>

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static atomic_bool started;

static void start(void) {
  if (VIPS_INIT("marketplace")) return;
  vips_concurrency_set(1);
  vips_cache_set_max(0);
  vips_cache_set_max_mem(0);
  vips_block_untrusted_set(TRUE);
  started = true;
}

/* false, with err when given, when libvips cannot start */
static bool running(char *err) {
  pthread_once(&start_once, start);
  if (!started && err) snprintf(err, 256, "libvips could not start: %.200s", vips_error_buffer());
  return started;
}

void media_thumbnail_fini(void) {
  if (atomic_load(&started)) vips_shutdown(); /* after the last call: none is starting it */
}

bool media_thumbnail_size(const char *path, int *width, int *height) {
  if (!running(NULL)) return false;
  VipsImage *im = vips_image_new_from_file(path, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
  if (!im) {
    vips_error_clear();
    return false;
  }
  *width = vips_image_get_width(im), *height = vips_image_get_height(im);
  g_object_unref(im);
  return *width > 0 && *height > 0;
}

bool media_thumbnail_webp(const char *path, int width, int height, const char *out_path, char err[256]) {
  if (!running(err)) return false;
  VipsImage *im = NULL;
  /* the stored original has no orientation tag (ext/imagemeta.h strips EXIF), so the variant
   * keeps its pixels' orientation, as the original is shown */
  int rc = vips_thumbnail(path, &im, width, "height", height, "size", VIPS_SIZE_FORCE, "no_rotate", TRUE, NULL);
  if (!rc) rc = vips_webpsave(im, out_path, "Q", 80, "strip", TRUE, NULL);
  if (rc) {
    snprintf(err, 256, "libvips: %.200s", vips_error_buffer());
    vips_error_clear();
  }
  if (im) g_object_unref(im);
  return rc == 0;
}
