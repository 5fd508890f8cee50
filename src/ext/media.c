/* The doors to the media library (media.h): it is loaded by the first call that needs it, from
 * the directory of the running binary (/proc/self/exe: build/asan/marketplace finds its own
 * sanitized build), with its symbols kept to itself (RTLD_LOCAL). */
#include "ext/media.h"
#include "core/log.h"
#include "ext/photobook.h"
#include "ext/thumbnail.h"
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Linked into the program (the unit tests link the library's objects): nothing to load. */
extern const media_api marketplace_media __attribute__((weak));

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static _Atomic(const media_api *) loaded; /* set once; read without the once by media_fini */
static char load_error[256];

/* The library's path beside the binary; false with err when the binary's own cannot be read. */
static bool library_path(char path[PATH_MAX], char err[256]) {
  ssize_t n = readlink("/proc/self/exe", path, PATH_MAX - 1);
  char *slash = n > 0 ? memrchr(path, '/', (size_t)n) : NULL;
  if (!slash || (size_t)(slash - path) + 1 + sizeof MEDIA_LIBRARY_FILE > PATH_MAX) {
    snprintf(err, 256, "the media library: cannot find this program's directory");
    return false;
  }
  memcpy(slash + 1, MEDIA_LIBRARY_FILE, sizeof MEDIA_LIBRARY_FILE);
  return true;
}

bool media_library_present(char err[256]) {
  char path[PATH_MAX];
  if (&marketplace_media) return true;
  if (!library_path(path, err)) return false;
  if (access(path, R_OK) == 0) return true;
  snprintf(err, 256, "the media library %.180s is missing: it is built beside the binary (make)", path);
  return false;
}

static void load(void) {
  const media_api *api = &marketplace_media;
  char path[PATH_MAX];
  if (!api && library_path(path, load_error)) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    api = lib ? dlsym(lib, "marketplace_media") : NULL;
    if (!api) /* the library, or one of its packages (libvips42, libtesseract5, libpoppler-glib8), is missing */
      snprintf(load_error, sizeof load_error, "the media library could not load: %.200s", dlerror());
    else if (api->version != MEDIA_API_VERSION)
      snprintf(load_error, sizeof load_error, "the media library %.150s is of another build", path), api = NULL;
  }
  if (!api) log_msg(LOG_ERROR, "%s", load_error);
  atomic_store(&loaded, api);
}

/* The loaded table, loading it on first use; NULL with err when it cannot be. */
static const media_api *media(char err[256]) {
  pthread_once(&load_once, load);
  const media_api *api = atomic_load(&loaded);
  if (!api && err) snprintf(err, 256, "%s", load_error);
  return api;
}

void media_fini(void) {
  const media_api *api = atomic_load(&loaded);
  if (api) api->fini();
}

bool thumbnail_size(const char *path, int *width, int *height) {
  const media_api *api = media(NULL);
  return api && api->thumbnail_size(path, width, height);
}

bool thumbnail_webp(const char *path, int width, int height, const char *out_path, char err[256]) {
  const media_api *api = media(err);
  return api && api->thumbnail_webp(path, width, height, out_path, err);
}

bool photobook_make(const char *const *paths, int n, const char *title, unsigned char **pdf, size_t *len,
                    char err[256]) {
  const media_api *api = media(err);
  *pdf = NULL, *len = 0;
  return api && api->photobook_make(paths, n, title, pdf, len, err);
}

bool ocr_image_here(const char *path, ocr_text *out, char err[256]) {
  const media_api *api = media(err);
  *out = (ocr_text){0};
  return api && api->ocr_image(path, out, err);
}

bool ocr_pdf_here(const char *path, ocr_text *out, char err[256]) {
  const media_api *api = media(err);
  *out = (ocr_text){0};
  return api && api->ocr_pdf(path, out, err);
}

void ocr_thread_release(void) {
  const media_api *api = atomic_load(&loaded); /* a thread that never recognised holds nothing */
  if (api) api->ocr_thread_release();
}
