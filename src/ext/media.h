/* The media libraries (libvips, Tesseract, leptonica, poppler, cairo) in a shared object of
 * their own, marketplace-media.so beside the binary, loaded on first use. With them the binary
 * loads 126 libraries, without them 44: they were more than half of what a process costs to
 * start and stop (49 of 86 ms of CPU for `serve`), paid by every process, every command and
 * every test server, while only uploaded photos, a dispute's photo book and recognition
 * helpers use them.
 *
 * thumbnail.h, photobook.h and ocr.h's *_here functions are the doors (ext/media.c): each calls
 * through the library's table, loading the library first (once per process, thread-safe). When
 * it cannot be loaded they fail as their contracts say a library failure does, with the reason
 * in err, and the reason is logged once. The library's code: ext/thumbnail.c, ext/photobook.c,
 * ext/ocr.c and the table (ext/media_lib.c). */
#ifndef EXT_MEDIA_H
#define EXT_MEDIA_H
#include "ext/ocr.h"
#include <stdbool.h>
#include <stddef.h>

#define MEDIA_LIBRARY_FILE "marketplace-media.so"
#define MEDIA_API_VERSION 1

/* The library's one exported symbol, `marketplace_media`. */
typedef struct media_api {
  int version; /* MEDIA_API_VERSION of the build that made it: a library of another build is refused */
  void (*fini)(void);
  bool (*thumbnail_size)(const char *path, int *width, int *height);
  bool (*thumbnail_webp)(const char *path, int width, int height, const char *out_path, char err[256]);
  bool (*photobook_make)(const char *const *paths, int n, const char *title, unsigned char **pdf, size_t *len,
                         char err[256]);
  bool (*ocr_image)(const char *path, ocr_text *out, char err[256]);
  bool (*ocr_pdf)(const char *path, ocr_text *out, char err[256]);
  void (*ocr_thread_release)(void);
} media_api;

/* At `serve`'s start: false, with err, when the library is not beside the binary (a test binary
 * that links the library's objects has none to find). It is not loaded. */
bool media_library_present(char err[256]);
/* At exit, after the last call: lets libvips free what it holds, when the library was loaded. */
void media_fini(void);

/* The library's implementations behind the table (ext/thumbnail.c, ext/photobook.c, ext/ocr.c). */
void media_thumbnail_fini(void);
bool media_thumbnail_size(const char *path, int *width, int *height);
bool media_thumbnail_webp(const char *path, int width, int height, const char *out_path, char err[256]);
bool media_photobook_make(const char *const *paths, int n, const char *title, unsigned char **pdf, size_t *len,
                          char err[256]);
bool media_ocr_image(const char *path, ocr_text *out, char err[256]);
bool media_ocr_pdf(const char *path, ocr_text *out, char err[256]);
void media_ocr_thread_release(void);

#endif
