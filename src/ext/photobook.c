/* Photos to a PDF with leptonica (photobook.h), in the media library (ext/media.h). Each
 * image's size is read from its header before it is decoded, so a small file that declares
 * gigapixels is refused cheaply. */
#include "ext/photobook.h"
#include "ext/media.h"
#include <leptonica/allheaders.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIXELS (64 * 1000 * 1000)
#define JPEG_QUALITY 80
#define PDF_DPI 150

/* The image at path, decoded and scaled to PHOTOBOOK_MAX_SIDE at most; NULL with err. */
static PIX *read_photo(const char *path, char err[256]) {
  int format = 0, w = 0, h = 0, bps = 0, spp = 0, cmap = 0;
  if (pixReadHeader(path, &format, &w, &h, &bps, &spp, &cmap) != 0 || (int64_t)w * h > MAX_PIXELS) {
    snprintf(err, 256, "a photo could not be read");
    return NULL;
  }
  PIX *pix = pixRead(path), *rgb = NULL, *scaled = NULL;
  if (pix) rgb = pixConvertTo32(pix); /* JPEG pages, whatever the source's depth or alpha */
  pixDestroy(&pix);
  int side = w > h ? w : h;
  if (rgb && side > PHOTOBOOK_MAX_SIDE) {
    float s = (float)PHOTOBOOK_MAX_SIDE / (float)side;
    scaled = pixScale(rgb, s, s);
    pixDestroy(&rgb);
    rgb = scaled;
  }
  if (!rgb) snprintf(err, 256, "a photo could not be decoded");
  return rgb;
}

bool media_photobook_make(const char *const *paths, int n, const char *title, unsigned char **pdf, size_t *len,
                          char err[256]) {
  *pdf = NULL, *len = 0, err[0] = 0;
  if (n < 1 || n > PHOTOBOOK_MAX_PHOTOS) {
    snprintf(err, 256, "from 1 to %d photos", PHOTOBOOK_MAX_PHOTOS);
    return false;
  }
  setMsgSeverity(L_SEVERITY_NONE);
  PIXA *pixa = pixaCreate(n);
  bool ok = pixa != NULL;
  for (int i = 0; ok && i < n; i++) {
    PIX *pix = read_photo(paths[i], err);
    ok = pix && pixaAddPix(pixa, pix, L_INSERT) == 0;
    if (pix && !ok) pixDestroy(&pix);
  }
  l_uint8 *data = NULL;
  size_t bytes = 0;
  if (ok && pixaConvertToPdfData(pixa, PDF_DPI, 1.0, L_JPEG_ENCODE, JPEG_QUALITY, title, &data, &bytes) != 0) {
    snprintf(err, 256, "the PDF could not be made");
    ok = false;
  }
  if (ok && (*pdf = malloc(bytes))) {
    memcpy(*pdf, data, bytes);
    *len = bytes;
  } else if (ok) {
    snprintf(err, 256, "out of memory");
    ok = false;
  }
  lept_free(data);
  pixaDestroy(&pixa);
  return ok;
}
