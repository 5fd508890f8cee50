/* libmagic behind a mutex: a magic cookie is not safe for concurrent use, and sniffing a file
 * takes microseconds, so one shared cookie is enough. */
#include "ext/filetype.h"
#include <magic.h>
#include <pthread.h>
#include <string.h>

static magic_t cookie;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static const struct {
  unsigned bit;
  const char *mime, *ext;
} known[] = {
    {FT_PNG, "image/png", "png"},
    {FT_JPEG, "image/jpeg", "jpg"},
    {FT_WEBP, "image/webp", "webp"},
    {FT_PDF, "application/pdf", "pdf"},
};

bool filetype_init(void) {
  cookie = magic_open(MAGIC_MIME_TYPE | MAGIC_ERROR);
  return cookie && magic_load(cookie, NULL) == 0;
}

filetype filetype_of(const char *path) {
  pthread_mutex_lock(&mu);
  const char *m = cookie ? magic_file(cookie, path) : NULL;
  filetype t = {0, "application/octet-stream", ""};
  for (size_t i = 0; m && i < sizeof known / sizeof *known; i++)
    if (!strcmp(m, known[i].mime)) t = (filetype){known[i].bit, known[i].mime, known[i].ext};
  pthread_mutex_unlock(&mu);
  return t;
}

const char *filetype_mime_for_key(const char *key) {
  const char *dot = strrchr(key, '.');
  for (size_t i = 0; dot && i < sizeof known / sizeof *known; i++)
    if (!strcmp(dot + 1, known[i].ext)) return known[i].mime;
  return NULL;
}

const char *filetype_describe(unsigned bits) {
  switch (bits) {
  case FT_IMAGES: return "a PNG, JPEG or WebP image";
  case FT_PNG | FT_JPEG | FT_PDF: return "a PNG or JPEG image or a PDF";
  case FT_IMAGES | FT_PDF: return "a PNG, JPEG or WebP image or a PDF";
  default: return "an accepted file type";
  }
}
