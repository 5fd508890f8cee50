/* Byte-level rewriting, no decoder: a JPEG is a sequence of marker segments around the
 * scans' entropy-coded data, and metadata lives in APPn segments (APP1 Exif/XMP, APP13 IPTC,
 * ...) that are dropped except APP0 (JFIF) and APP2 (the ICC colour profile, needed to show
 * colours right) and APP14 (Adobe colour transform). A PNG is a sequence of chunks; eXIf,
 * tEXt, zTXt, iTXt and tIME are dropped, and so is anything after IEND. A WebP (RIFF) loses
 * its EXIF and XMP chunks. The result is written to a temporary file and renamed over the
 * original. It fails closed: a file whose segments or chunks do not add up (a length past
 * the end, a byte where a marker must be) is reported unreadable, never kept as it came. */
#include "ext/imagemeta.h"
#include "core/util.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool keep_jpeg_segment(unsigned char marker) {
  if (marker < 0xE0 || marker > 0xEF) return true; /* not APPn */
  return marker == 0xE0 || marker == 0xE2 || marker == 0xEE;
}

static bool standalone_marker(unsigned char m) { return m == 0x01 || (m >= 0xD0 && m <= 0xD7); }

/* The end of the entropy-coded data that starts at i: the next 0xFF that begins a marker
 * (not a stuffed 0xFF00, a restart marker or a fill byte), or n. */
static size_t scan_end(const unsigned char *in, size_t n, size_t i) {
  for (; i + 1 < n; i++)
    if (in[i] == 0xFF && in[i + 1] != 0x00 && in[i + 1] != 0xFF && !standalone_marker(in[i + 1])) return i;
  return n;
}

/* Copies in to out without metadata, following every segment, including those between the
 * scans of a progressive image; bytes after the end-of-image marker go too. Returns the new
 * length, 0 when the structure cannot be followed. */
static size_t strip_jpeg(const unsigned char *in, size_t n, unsigned char *out) {
  if (n < 4 || in[0] != 0xFF || in[1] != 0xD8) return 0;
  size_t i = 2, o = 0;
  out[o++] = 0xFF, out[o++] = 0xD8;
  while (i < n) {
    if (in[i] != 0xFF) return 0;
    while (i + 1 < n && in[i + 1] == 0xFF) i++; /* fill bytes */
    if (i + 1 >= n) return 0;
    unsigned char marker = in[i + 1];
    if (marker == 0xD9) { /* end of image */
      out[o++] = 0xFF, out[o++] = 0xD9;
      return o;
    }
    if (standalone_marker(marker)) {
      out[o++] = 0xFF, out[o++] = marker, i += 2;
      continue;
    }
    if (marker == 0x00 || marker == 0xD8 || i + 4 > n) return 0;
    size_t len = ((size_t)in[i + 2] << 8) | in[i + 3];
    if (len < 2 || i + 2 + len > n) return 0;
    if (keep_jpeg_segment(marker)) memcpy(out + o, in + i, 2 + len), o += 2 + len;
    i += 2 + len;
    if (marker == 0xDA) { /* start of scan: its entropy-coded data follows */
      size_t end = scan_end(in, n, i);
      memcpy(out + o, in + i, end - i), o += end - i;
      i = end;
    }
  }
  return o; /* ended without its end-of-image marker: what there is, without metadata */
}

static bool drop_png_chunk(const unsigned char type[4]) {
  static const char *const dropped[] = {"eXIf", "tEXt", "zTXt", "iTXt", "tIME"};
  for (size_t i = 0; i < ARRAY_LEN(dropped); i++)
    if (!memcmp(type, dropped[i], 4)) return true;
  return false;
}

static size_t strip_png(const unsigned char *in, size_t n, unsigned char *out) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n < 8 || memcmp(in, sig, 8)) return 0;
  memcpy(out, in, 8);
  size_t i = 8, o = 8;
  while (i + 12 <= n) {
    size_t len = ((size_t)in[i] << 24) | ((size_t)in[i + 1] << 16) | ((size_t)in[i + 2] << 8) | in[i + 3];
    if (len > n - i - 12) return 0;
    if (!drop_png_chunk(in + i + 4)) memcpy(out + o, in + i, len + 12), o += len + 12;
    if (!memcmp(in + i + 4, "IEND", 4)) return o; /* the image ends here: bytes after it go too */
    i += len + 12;
  }
  return o;
}

static uint32_t le32(const unsigned char *p) {
  return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* WebP is a RIFF container: EXIF and XMP chunks are dropped and their flags in the VP8X
 * header cleared, then the RIFF size is rewritten. */
static size_t strip_webp(const unsigned char *in, size_t n, unsigned char *out) {
  if (n < 12 || memcmp(in, "RIFF", 4) || memcmp(in + 8, "WEBP", 4)) return 0;
  memcpy(out, in, 12);
  size_t i = 12, o = 12;
  while (i + 8 <= n) {
    size_t len = le32(in + i + 4), padded = len + (len & 1);
    if (padded > n - i - 8) return 0;
    bool meta = !memcmp(in + i, "EXIF", 4) || !memcmp(in + i, "XMP ", 4);
    if (!meta) {
      memcpy(out + o, in + i, 8 + padded);
      if (!memcmp(in + i, "VP8X", 4) && len >= 1) out[o + 8] &= (unsigned char)~0x0C; /* EXIF and XMP flags */
      o += 8 + padded;
    }
    i += 8 + padded;
  }
  put_le32(out + 4, (uint32_t)(o - 8));
  return o;
}

image_meta_rc image_strip_metadata(const char *path, const char *mime) {
  bool jpeg = !strcmp(mime, "image/jpeg"), png = !strcmp(mime, "image/png"), webp = !strcmp(mime, "image/webp");
  if (!jpeg && !png && !webp) return IMAGE_META_OK;
  size_t n;
  unsigned char *in = (unsigned char *)read_file(path, &n);
  if (!in) return IMAGE_META_IO_ERROR;
  unsigned char *out = xmalloc(n + 1);
  size_t m = jpeg ? strip_jpeg(in, n, out) : png ? strip_png(in, n, out) : strip_webp(in, n, out);
  image_meta_rc rc = m == 0 ? IMAGE_META_UNREADABLE : IMAGE_META_OK;
  if (m > 0 && m < n) { /* something was removed */
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.strip", path);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(out, 1, m, f) == m;
    if (f && fclose(f) != 0) ok = false;
    ok = ok && rename(tmp, path) == 0;
    if (!ok) remove(tmp), rc = IMAGE_META_IO_ERROR;
  }
  free(in);
  free(out);
  return rc;
}
