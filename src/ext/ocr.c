/* Document text for the recognition rules.
 *
 * Tesseract: one TessBaseAPI per thread, kept under a pthread key whose destructor ends it
 * when the thread exits. Creating one loads eng.traineddata (a few hundred ms, tens of MB),
 * while a recognition reuses it and TessBaseAPIClear() drops the page between calls.
 * Initialisation failing (no language data) is "recognition unavailable": the instance is
 * discarded and the next call tries again, so installing the data fixes a running service.
 * Tesseract's own diagnostics go to /dev/null and leptonica's are silenced: the reason for a
 * failure reaches the caller through err, and the log stays one line per event.
 *
 * OpenMP is switched off (max active levels 0, so every parallel region runs on its caller's
 * thread) unless OMP_THREAD_LIMIT or OMP_MAX_ACTIVE_LEVELS is set in the environment: the
 * parallelism is across queue workers, and Tesseract's own threads, spinning against each
 * other and the workers, made one licence take 0.4-0.8 s instead of 0.1 s on two cores. It is
 * process-wide, which is harmless because only Tesseract uses OpenMP here.
 *
 * Binarisation is Sauvola's (thresholding_method 2), not Tesseract's default global Otsu:
 * licences are printed on coloured, patterned backgrounds and photographed under uneven light,
 * where one global threshold turns the background into noise. On a textured 4000x2520 photo
 * of a card Otsu read nothing (confidence 0.22, 7 s) and Sauvola read every field (0.95, under
 * 1 s); on clean scans both read the same.
 *
 * Images go through pixRead after pixReadHeader has bounded their size (a small PNG can
 * declare gigapixels). Before OCR an image is made something Tesseract reads well: alpha laid
 * over white (text on a transparent background would otherwise be black on black), palettes
 * and odd depths converted to 8-bit grey, and very large photos scaled down to 4000 px on the
 * long side, which keeps card text far above Tesseract's useful size and the time bounded.
 *
 * PDFs: per page (at most the first 3), the text layer is used when it holds at least 16
 * letters or digits and is not just a caption on a scan (images covering half the page with
 * fewer than 200 letters or digits); otherwise the page is rendered with cairo at 300 dpi
 * (a page larger than 20 megapixels at that resolution is rendered smaller) into an image
 * surface that is converted in memory to an 8-bit grey Pix, so no temporary file exists.
 *
 * An image or page that reads with confidence below 0.6 is tried again turned by 90, 270 and
 * 180 degrees: uploads have their EXIF data (and so their orientation) removed, and a card
 * photographed in portrait arrives sideways. A readable document costs one pass; an
 * unreadable one up to four.
 *
 * Time is bounded per image or page: all its passes share OCR_PAGE_BUDGET_MS of the thread's
 * CPU time, which Tesseract's monitor checks through its cancel callback, and no further turn
 * is tried once it is spent. CPU time, not wall time: on a loaded machine (recognition runs at
 * a lower priority) a licence must read the same as on an idle one, not be cut short. A
 * readable card takes well under a second; an image of noise, which Tesseract would otherwise
 * chew on for tens of seconds (every speck a candidate glyph, four times over), now costs the
 * budget and reads as unreadable (no text, confidence 0).
 *
 * A file that cannot be decoded is the document's fault, not the engine's: the result is
 * success with no text and confidence 0, which the rules read as "unreadable". */
#include "ext/ocr.h"
#include "core/buf.h"
#include "core/util.h"
#include "ext/media.h"
#include <cairo.h>
#include <ctype.h>
#include <errno.h>
#include <glib.h>
#include <leptonica/allheaders.h>
#include <math.h>
#include <poppler.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tesseract/capi.h>
#include <time.h>

enum {
  OCR_MAX_IMAGE_PIXELS = 64 * 1000 * 1000, /* refused before decoding */
  OCR_MAX_SIDE = 4000,                     /* larger photos are scaled down to this */
  OCR_DEFAULT_DPI = 300,                   /* assumed when an image declares none */
  OCR_PDF_MAX_PAGES = 3,
  OCR_PDF_MAX_TEXT = 16 * 1024 * 1024, /* a document's text past this reads as unreadable */
  OCR_PDF_DPI = 300,
  OCR_PDF_MAX_PIXELS = 20 * 1000 * 1000,
  OCR_TEXT_LAYER_MIN = 16,   /* letters and digits for a page's text layer to count */
  OCR_TEXT_LAYER_RICH = 200, /* ... and to count even over a page-sized image */
};
/* Below this confidence the image is tried turned (the licence rules' unreadable threshold). */
#define OCR_ROTATE_BELOW 0.6
/* All the passes over one image or PDF page together (see the design note). */
#define OCR_PAGE_BUDGET_MS OCR_PAGE_MS
/* Smaller images hold no readable document, and Tesseract refuses some of them outright,
 * which would pass for "recognition unavailable" */
#define OCR_MIN_SIDE 32

static pthread_key_t tess_key;
static pthread_once_t tess_once = PTHREAD_ONCE_INIT;

static void tess_destroy(void *p) {
  TessBaseAPIEnd(p);
  TessBaseAPIDelete(p);
}

/* libgomp's, when Debian's libtesseract (built with OpenMP) brought it in; weak, so neither the
 * link nor a Tesseract built without OpenMP needs it. */
extern void omp_set_max_active_levels(int levels) __attribute__((weak));

static void tess_key_init(void) {
  if (pthread_key_create(&tess_key, tess_destroy) != 0) abort();
  setMsgSeverity(L_SEVERITY_NONE);
  if (omp_set_max_active_levels && !getenv("OMP_THREAD_LIMIT") && !getenv("OMP_MAX_ACTIVE_LEVELS"))
    omp_set_max_active_levels(0);
}

/* The calling thread's initialised instance, created on first use; NULL with err set when
 * Tesseract cannot start. */
static TessBaseAPI *tess_get(char err[256]) {
  TessBaseAPI *api = pthread_getspecific(tess_key);
  if (api) return api;
  api = TessBaseAPICreate();
  if (!api) {
    snprintf(err, 256, "tesseract: cannot create an instance");
    return NULL;
  }
  TessBaseAPISetVariable(api, "debug_file", "/dev/null");
  if (TessBaseAPIInit3(api, NULL, "eng") != 0) {
    snprintf(err, 256, "tesseract: cannot load the English language data (tesseract-ocr-eng)");
    TessBaseAPIDelete(api);
    return NULL;
  }
  TessBaseAPISetVariable(api, "thresholding_method", "2");
  if (pthread_setspecific(tess_key, api) != 0) {
    snprintf(err, 256, "tesseract: cannot keep the instance");
    tess_destroy(api);
    return NULL;
  }
  return api;
}

void media_ocr_thread_release(void) {
  pthread_once(&tess_once, tess_key_init);
  TessBaseAPI *api = pthread_getspecific(tess_key);
  if (!api) return;
  pthread_setspecific(tess_key, NULL);
  tess_destroy(api);
}

/* Sets *out to an owned empty text (an unreadable document); false on out of memory. */
static bool set_empty(ocr_text *out, char err[256]) {
  out->confidence = 0;
  out->text = strdup("");
  if (!out->text) snprintf(err, 256, "out of memory");
  return out->text != NULL;
}

/* True when path can be opened for reading; otherwise err says why. A missing upload is the
 * service's failure (storage), not the document's. */
static bool file_openable(const char *path, char err[256]) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, 256, "cannot open %s: %s", path, ERRNO_TEXT());
    return false;
  }
  fclose(f);
  return true;
}

/* The calling thread's CPU time: Tesseract recognises on the calling thread (OpenMP's nested
 * parallelism is off, see tess_key_init). */
static int64_t cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Tesseract's cancel callback: true once the thread's CPU time reaches the deadline. */
static bool over_budget(void *deadline, int words) {
  (void)words;
  return cpu_ms() >= *(const int64_t *)deadline;
}

/* Recognises pix on this thread's instance before deadline (cpu_ms): a new heap copy of the
 * text in *text and the confidence in *conf; past the deadline, no text and confidence 0.
 * False (err set) when the engine fails. */
static bool tess_run(PIX *pix, int64_t deadline, char **text, double *conf, char err[256]) {
  bool ok = false;
  char *t = NULL;
  if (cpu_ms() >= deadline) {
    *conf = 0, *text = strdup("");
    return *text || (snprintf(err, 256, "out of memory"), false);
  }
  TessBaseAPI *api = tess_get(err);
  if (!api) goto out;
  TessBaseAPISetImage2(api, pix);
  if (pixGetXRes(pix) <= 0) TessBaseAPISetSourceResolution(api, OCR_DEFAULT_DPI);
  ETEXT_DESC *monitor = TessMonitorCreate();
  if (!monitor) {
    snprintf(err, 256, "out of memory");
    goto out;
  }
  TessMonitorSetCancelFunc(monitor, over_budget);
  TessMonitorSetCancelThis(monitor, &deadline);
  int rc = TessBaseAPIRecognize(api, monitor);
  TessMonitorDelete(monitor);
  if (rc != 0 && cpu_ms() >= deadline) { /* out of time: what it read is not to be trusted */
    *conf = 0, *text = strdup("");
    ok = *text != NULL;
    if (!ok) snprintf(err, 256, "out of memory");
    goto out;
  }
  if (rc != 0) {
    snprintf(err, 256, "tesseract: recognition failed");
    goto out;
  }
  t = TessBaseAPIGetUTF8Text(api);
  if (!t) {
    snprintf(err, 256, "tesseract: no text result");
    goto out;
  }
  int mean = TessBaseAPIMeanTextConf(api);
  *conf = mean < 0 ? 0 : mean > 100 ? 1.0 : mean / 100.0;
  *text = strdup(t);
  if (!*text) {
    snprintf(err, 256, "out of memory");
    goto out;
  }
  ok = true;
out:
  if (t) TessDeleteText(t);
  if (api) TessBaseAPIClear(api);
  return ok;
}

/* Recognises pix as it is and, when that reads poorly (a photo taken sideways: stored photos
 * have lost their EXIF orientation), turned a quarter clockwise, a quarter back and upside
 * down, stopping at the first good reading and otherwise keeping the best. */
static bool tess_oriented(PIX *pix, char **text, double *conf, char err[256]) {
  static const int quads[] = {1, 3, 2};
  int64_t deadline = cpu_ms() + OCR_PAGE_BUDGET_MS;
  if (!tess_run(pix, deadline, text, conf, err)) return false;
  for (size_t i = 0; i < sizeof quads / sizeof quads[0] && *conf < OCR_ROTATE_BELOW && cpu_ms() < deadline; i++) {
    PIX *turned = pixRotateOrth(pix, quads[i]);
    char *t = NULL;
    double c = 0;
    bool ok = turned && tess_run(turned, deadline, &t, &c, err);
    pixDestroy(&turned);
    if (!ok) break;
    if (c > *conf) {
      free(*text);
      *text = t, *conf = c;
    } else {
      free(t);
    }
  }
  return true;
}

/* Replaces *pix by a version Tesseract reads well (see the design note); false when
 * leptonica cannot convert it. */
static bool prepare_pix(PIX **pix) {
  PIX *p = *pix, *q = NULL;
  if (pixGetSpp(p) == 4 && pixGetDepth(p) == 32) {
    if (!(q = pixAlphaBlendUniform(p, 0xffffff00))) return false;
    pixDestroy(&p), p = q;
  }
  int d = pixGetDepth(p);
  if (pixGetColormap(p) || (d != 1 && d != 8 && d != 32)) {
    if (!(q = pixConvertTo8(p, 0))) goto fail;
    pixDestroy(&p), p = q;
  }
  int w = pixGetWidth(p), h = pixGetHeight(p), side = w > h ? w : h;
  if (side > OCR_MAX_SIDE) {
    float f = (float)OCR_MAX_SIDE / (float)side;
    if (!(q = pixScale(p, f, f))) goto fail;
    int xres = pixGetXRes(p);
    pixDestroy(&p), p = q;
    if (xres > 0) pixSetResolution(p, (int)(xres * f), (int)(xres * f));
  }
  *pix = p;
  return true;
fail:
  *pix = p;
  return false;
}

bool media_ocr_image(const char *path, ocr_text *out, char err[256]) {
  bool ok = false;
  PIX *pix = NULL;
  int format = 0, w = 0, h = 0, bps = 0, spp = 0, cmap = 0;
  out->text = NULL, out->confidence = 0, err[0] = 0;
  pthread_once(&tess_once, tess_key_init);
  if (!file_openable(path, err)) goto out;
  if (pixReadHeader(path, &format, &w, &h, &bps, &spp, &cmap) != 0) {
    snprintf(err, 256, "not a readable image");
    ok = set_empty(out, err);
    goto out;
  }
  if ((int64_t)w * h > OCR_MAX_IMAGE_PIXELS) {
    snprintf(err, 256, "image too large (%dx%d)", w, h);
    ok = set_empty(out, err);
    goto out;
  }
  if (w < OCR_MIN_SIDE || h < OCR_MIN_SIDE) {
    snprintf(err, 256, "image too small (%dx%d)", w, h);
    ok = set_empty(out, err);
    goto out;
  }
  if (!(pix = pixRead(path))) {
    snprintf(err, 256, "image cannot be decoded");
    ok = set_empty(out, err);
    goto out;
  }
  if (!prepare_pix(&pix)) {
    snprintf(err, 256, "leptonica: cannot convert the image");
    goto out;
  }
  ok = tess_oriented(pix, &out->text, &out->confidence, err);
out:
  pixDestroy(&pix);
  return ok;
}

/* ---- PDF ---- */

/* Appends a page's text, on a line of its own. */
static buf_rc text_add(struct buf *b, const char *s) {
  if (buf_len(b) && buf_ptr(b)[buf_len(b) - 1] != '\n') buf_addn(b, "\n", 1);
  return buf_add(b, s);
}

static long count_alnum(const char *s) {
  long n = 0;
  for (; *s; s++) n += isalnum((unsigned char)*s) != 0;
  return n;
}

/* Fraction of the page's area covered by images (overlaps counted twice, capped at 1). */
static double image_coverage(PopplerPage *page) {
  double pw = 0, ph = 0, area = 0;
  poppler_page_get_size(page, &pw, &ph);
  if (pw <= 0 || ph <= 0) return 0;
  GList *maps = poppler_page_get_image_mapping(page);
  for (GList *l = maps; l; l = l->next) {
    PopplerImageMapping *m = l->data;
    area += fabs((m->area.x2 - m->area.x1) * (m->area.y2 - m->area.y1));
  }
  poppler_page_free_image_mapping(maps);
  double f = area / (pw * ph);
  return f > 1 ? 1 : f;
}

/* Renders page on white at OCR_PDF_DPI (less for huge pages) into a new 8-bit grey Pix;
 * NULL with err set on failure. */
static PIX *render_page(PopplerPage *page, char err[256]) {
  PIX *pix = NULL;
  cairo_surface_t *surf = NULL;
  cairo_t *cr = NULL;
  double pw = 0, ph = 0;
  poppler_page_get_size(page, &pw, &ph);
  double scale = OCR_PDF_DPI / 72.0;
  if (pw <= 0 || ph <= 0) pw = 612, ph = 792;
  if (pw * ph * scale * scale > OCR_PDF_MAX_PIXELS) scale = sqrt(OCR_PDF_MAX_PIXELS / (pw * ph));
  int w = (int)ceil(pw * scale), h = (int)ceil(ph * scale);
  if (w < 1) w = 1;
  if (h < 1) h = 1;
  surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
  if (cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS) {
    snprintf(err, 256, "cairo: %s", cairo_status_to_string(cairo_surface_status(surf)));
    goto out;
  }
  cr = cairo_create(surf);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_scale(cr, scale, scale);
  poppler_page_render(page, cr);
  cairo_surface_flush(surf);
  if (cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
    snprintf(err, 256, "cairo: %s", cairo_status_to_string(cairo_status(cr)));
    goto out;
  }
  if (!(pix = pixCreate(w, h, 8))) {
    snprintf(err, 256, "out of memory");
    goto out;
  }
  const unsigned char *data = cairo_image_surface_get_data(surf);
  int stride = cairo_image_surface_get_stride(surf), wpl = pixGetWpl(pix);
  l_uint32 *pdata = pixGetData(pix);
  for (int y = 0; y < h; y++) {
    const uint32_t *src = (const uint32_t *)(const void *)(data + (size_t)y * stride);
    l_uint32 *line = pdata + (size_t)y * wpl;
    for (int x = 0; x < w; x++) {
      uint32_t v = src[x];
      unsigned g = ((v >> 16 & 0xff) * 77 + (v >> 8 & 0xff) * 150 + (v & 0xff) * 29) >> 8;
      SET_DATA_BYTE(line, x, g);
    }
  }
  int dpi = (int)lround(scale * 72);
  pixSetResolution(pix, dpi, dpi);
out:
  if (cr) cairo_destroy(cr);
  if (surf) cairo_surface_destroy(surf);
  return pix;
}

/* Text of one page into *text (g_malloc'd or heap: *heap says which) with its confidence. */
static bool page_text(PopplerPage *page, char **text, bool *heap, double *conf, char err[256]) {
  char *layer = poppler_page_get_text(page);
  long letters = layer ? count_alnum(layer) : 0;
  if (letters >= OCR_TEXT_LAYER_MIN && (letters >= OCR_TEXT_LAYER_RICH || image_coverage(page) < 0.5)) {
    *text = layer, *heap = false, *conf = 1.0;
    return true;
  }
  g_free(layer);
  PIX *pix = render_page(page, err);
  if (!pix) return false;
  bool ok = tess_oriented(pix, text, conf, err);
  *heap = true;
  pixDestroy(&pix);
  return ok;
}

bool media_ocr_pdf(const char *path, ocr_text *out, char err[256]) {
  bool ok = false;
  GError *gerr = NULL;
  PopplerDocument *doc = NULL;
  char *abs = NULL, *uri = NULL;
  struct buf text_all;
  buf_init(&text_all, OCR_PDF_MAX_TEXT);
  double weighted = 0, weight = 0;
  out->text = NULL, out->confidence = 0, err[0] = 0;
  pthread_once(&tess_once, tess_key_init);
  if (!file_openable(path, err)) goto out;
  abs = g_canonicalize_filename(path, NULL);
  uri = g_filename_to_uri(abs, NULL, &gerr);
  if (uri) doc = poppler_document_new_from_file(uri, NULL, &gerr);
  if (!doc) {
    snprintf(err, 256, "not a readable PDF: %s", gerr ? gerr->message : "unknown error");
    ok = set_empty(out, err);
    goto out;
  }
  int n = poppler_document_get_n_pages(doc);
  if (n > OCR_PDF_MAX_PAGES) n = OCR_PDF_MAX_PAGES;
  for (int i = 0; i < n; i++) {
    PopplerPage *page = poppler_document_get_page(doc, i);
    if (!page) continue;
    char *text = NULL;
    bool heap = false;
    double conf = 0;
    bool got = page_text(page, &text, &heap, &conf, err);
    g_object_unref(page);
    if (!got) goto out;
    long letters = count_alnum(text);
    weighted += conf * (double)letters, weight += (double)letters;
    buf_rc added = text_add(&text_all, text);
    if (heap)
      free(text);
    else
      g_free(text);
    if (added == BUF_TOO_LARGE) {
      snprintf(err, 256, "text larger than %d MiB", OCR_PDF_MAX_TEXT / (1024 * 1024));
      ok = set_empty(out, err);
      goto out;
    }
    if (added != BUF_OK) {
      snprintf(err, 256, "out of memory");
      goto out;
    }
  }
  if (!buf_ptr(&text_all)) {
    ok = set_empty(out, err);
    goto out;
  }
  out->text = buf_take(&text_all, NULL);
  out->confidence = weight > 0 ? weighted / weight : 0;
  ok = true;
out:
  buf_free(&text_all);
  if (doc) g_object_unref(doc);
  if (gerr) g_error_free(gerr);
  g_free(uri);
  g_free(abs);
  return ok;
}
