/* Unit tests for src/ext/ocr.c against the real engines: a licence drawn by ImageMagick as
 * PNG, JPEG and WebP (also sideways, on a textured background and on a transparent one) is
 * OCR'd; PDFs made here with cairo give their text layer (confidence 1.0), or, holding only a
 * picture of the licence, go through rendering and OCR; only the first 3 pages are read;
 * undecodable files are "unreadable" (true, no text) while a missing file is an engine
 * failure (false); two threads recognise at once on their own Tesseract instances. The OCR
 * output is also fed to the recognition rules. Needs ImageMagick's convert and the DejaVu
 * fonts (scripts/deps.sh test). ImageMagick's Debian policy forbids writing PDF, so the PDFs
 * are made with cairo, whose toy font API loads fontconfig: teardown releases both so the
 * test is clean under LeakSanitizer. */
#include "domain/providers/recognition.h"
#include "ext/ocr.h"
#include "unit.h"
#include <cairo-pdf.h>
#include <cairo.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const int64_t NOW = 1781524800000LL; /* 2026-06-15T12:00:00Z */

static char dir[64];

/* dir/name into out (256 bytes). */
static const char *path_in(char out[256], const char *name) {
  snprintf(out, 256, "%s/%s", dir, name);
  return out;
}

static int sh(const char *cmd) {
  int rc = system(cmd);
  if (rc != 0) print_error("command failed (%d): %s\n", rc, cmd);
  return rc;
}

static bool contains(const char *text, const char *word) { return text && strstr(text, word) != NULL; }

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- fixtures ---- */

static int make_images(void) {
  char cmd[2048], png[256], out[256];
  snprintf(cmd, sizeof cmd,
           "convert -size 1200x620 xc:white -font DejaVu-Sans -fill black "
           "-pointsize 44 -annotate +40+80 'CALIFORNIA' -annotate +40+150 'DRIVER LICENSE' "
           "-pointsize 36 -annotate +40+240 'DL I1234567' -annotate +40+310 'EXP 08/31/2030' "
           "-annotate +40+380 'LN SAMPLE' -annotate +40+450 'FN ALEXANDER JOSEPH' "
           "-annotate +40+520 'DOB 08/31/1977' -annotate +40+590 'SEX M  HGT 5-05  EYES BRN' %s",
           path_in(png, "licence.png"));
  if (sh(cmd)) return -1;
  snprintf(cmd, sizeof cmd, "convert %s -rotate 90 %s", png, path_in(out, "sideways.png"));
  if (sh(cmd)) return -1;
  snprintf(cmd, sizeof cmd, "convert %s -quality 90 %s", png, path_in(out, "licence.jpg"));
  if (sh(cmd)) return -1;
  snprintf(cmd, sizeof cmd, "convert %s %s", png, path_in(out, "licence.webp"));
  if (sh(cmd)) return -1;
  snprintf(cmd, sizeof cmd,
           "convert -size 1100x200 xc:none -font DejaVu-Sans -fill black -pointsize 48 "
           "-annotate +40+120 'TRANSPARENT BACKGROUND' PNG32:%s",
           path_in(out, "alpha.png"));
  if (sh(cmd)) return -1;
  /* a photo-like card: coloured, textured background and sensor noise (fixed seed) */
  snprintf(cmd, sizeof cmd,
           "convert -seed 7 -size 2000x1260 plasma:grey90-grey70 -font DejaVu-Sans -fill '#202020' "
           "-pointsize 75 -annotate +80+150 'CALIFORNIA' -annotate +80+260 'DRIVER LICENSE' "
           "-pointsize 55 -annotate +80+400 'DL I1234567' -annotate +80+515 'EXP 08/31/2030' "
           "-annotate +80+630 'LN SAMPLE' -annotate +80+745 'FN ALEXANDER JOSEPH' "
           "-annotate +80+860 'DOB 08/31/1977' -attenuate 0.4 +noise Gaussian -quality 85 %s",
           path_in(out, "photo.jpg"));
  if (sh(cmd)) return -1;
  snprintf(cmd, sizeof cmd, "convert -size 800x400 xc:white %s", path_in(out, "blank.png"));
  if (sh(cmd)) return -1;
  snprintf(cmd, sizeof cmd, "convert -size 4x4 xc:gray50 %s", path_in(out, "tiny.png"));
  return sh(cmd);
}

static void pdf_lines(cairo_t *cr, const char *const *lines) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 14);
  cairo_set_source_rgb(cr, 0, 0, 0);
  for (int i = 0; lines[i]; i++) {
    cairo_move_to(cr, 50, 60 + 24 * i);
    cairo_show_text(cr, lines[i]);
  }
  cairo_show_page(cr);
}

/* A PDF whose pages hold the given lines as real text (pages separated by NULL entries, the
 * list ended by two NULLs). */
static int make_text_pdf(const char *path, const char *const *pages) {
  cairo_surface_t *s = cairo_pdf_surface_create(path, 612, 792);
  cairo_t *cr = cairo_create(s);
  for (const char *const *p = pages; *p;) {
    pdf_lines(cr, p);
    while (*p) p++;
    p++;
  }
  cairo_destroy(cr);
  cairo_surface_finish(s);
  int rc = cairo_surface_status(s) == CAIRO_STATUS_SUCCESS ? 0 : -1;
  cairo_surface_destroy(s);
  return rc;
}

/* A PDF with one page holding only a picture (a scan): no text layer. */
static int make_scan_pdf(const char *path, const char *png) {
  cairo_surface_t *img = cairo_image_surface_create_from_png(png);
  if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
    cairo_surface_destroy(img);
    return -1;
  }
  cairo_surface_t *s = cairo_pdf_surface_create(path, 612, 792);
  cairo_t *cr = cairo_create(s);
  double scale = 540.0 / cairo_image_surface_get_width(img);
  cairo_translate(cr, 36, 36);
  cairo_scale(cr, scale, scale);
  cairo_set_source_surface(cr, img, 0, 0);
  cairo_paint(cr);
  cairo_show_page(cr);
  cairo_destroy(cr);
  cairo_surface_finish(s);
  int rc = cairo_surface_status(s) == CAIRO_STATUS_SUCCESS ? 0 : -1;
  cairo_surface_destroy(s);
  cairo_surface_destroy(img);
  return rc;
}

static int write_file(const char *path, const char *data) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  fputs(data, f);
  return fclose(f);
}

static const char *const certificate[] = {
    "CERTIFICATE OF LIABILITY INSURANCE",
    "Insurer: State Farm Fire and Casualty Company",
    "Policy Number: ABC-123",
    "Effective Date: 01/01/2026",
    "Expiration Date: 01/01/2027",
    "Each Occurrence: $1,000,000",
    NULL,
    NULL,
};

static const char *const four_pages[] = {"PAGE ONE ALPHA BRAVO",
                                         NULL,
                                         "PAGE TWO CHARLIE DELTA",
                                         NULL,
                                         "PAGE THREE ECHO FOXTROT",
                                         NULL,
                                         "PAGE FOUR GOLF HOTEL",
                                         NULL,
                                         NULL};

static int group_setup(void **state) {
  (void)state;
  char p[256], png[256];
  snprintf(dir, sizeof dir, "/tmp/ocr-test-XXXXXX");
  if (!mkdtemp(dir)) return -1;
  if (make_images()) {
    print_error("ImageMagick's convert with the DejaVu fonts is needed (scripts/deps.sh test)\n");
    return -1;
  }
  if (make_text_pdf(path_in(p, "certificate.pdf"), certificate)) return -1;
  if (make_text_pdf(path_in(p, "four.pdf"), four_pages)) return -1;
  if (make_scan_pdf(path_in(p, "scan.pdf"), path_in(png, "licence.png"))) return -1;
  if (write_file(path_in(p, "damaged.pdf"), "%PDF-1.4\nthis is not a PDF\n")) return -1;
  if (write_file(path_in(p, "notes.png"), "these are not pixels\n")) return -1;
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  ocr_thread_release();
  cairo_debug_reset_static_data();
  void (*fc_fini)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "FcFini"); /* loaded by cairo */
  if (fc_fini) fc_fini();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return sh(cmd);
}

/* ---- images ---- */

static void check_licence_text(const ocr_text *t) {
  assert_non_null(t->text);
  assert_true(contains(t->text, "CALIFORNIA"));
  assert_true(contains(t->text, "DRIVER LICENSE"));
  assert_true(contains(t->text, "08/31/2030"));
  assert_true(contains(t->text, "SAMPLE"));
  assert_true(t->confidence > 0.6 && t->confidence <= 1.0);
}

static void test_png_licence(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "licence.png"), &t, err)); /* first use: the instance starts */
  ocr_text_free(&t);
  double start = mono_s();
  assert_true(ocr_image(p, &t, err));
  print_message("one licence OCR (1200x620 PNG, warm instance): %.2f s, confidence %.2f\n", mono_s() - start,
                t.confidence);
  check_licence_text(&t);
  ocr_text_free(&t);
}

/* The OCR output read by the licence rules gives the printed fields. */
static void test_png_licence_recognised(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "licence.png"), &t, err));
  licence_result r;
  recognize_licence(t.text, t.confidence, NOW, &r);
  assert_string_equal(r.status, "passed");
  assert_string_equal(r.dob, "1977-08-31");
  assert_string_equal(r.expiry, "2030-08-31");
  assert_string_equal(r.state, "CA");
  assert_string_equal(r.name, "ALEXANDER JOSEPH SAMPLE");
  ocr_text_free(&t);
}

static void test_jpeg_and_webp(void **state) {
  (void)state;
  const char *names[] = {"licence.jpg", "licence.webp"};
  for (size_t i = 0; i < 2; i++) {
    char p[256], err[256];
    ocr_text t = {0};
    assert_true(ocr_image(path_in(p, names[i]), &t, err));
    check_licence_text(&t);
    ocr_text_free(&t);
  }
}

/* A card photographed sideways (uploads lose their EXIF orientation) is read turned. */
static void test_sideways_photo(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "sideways.png"), &t, err));
  check_licence_text(&t);
  ocr_text_free(&t);
}

/* A card on a coloured, noisy background still reads (local thresholding). */
static void test_textured_photo(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  double start = mono_s();
  assert_true(ocr_image(path_in(p, "photo.jpg"), &t, err));
  print_message("one licence photo OCR (2000x1260 JPEG, textured): %.2f s, confidence %.2f\n", mono_s() - start,
                t.confidence);
  check_licence_text(&t);
  licence_result r;
  recognize_licence(t.text, t.confidence, NOW, &r);
  assert_string_equal(r.status, "passed");
  ocr_text_free(&t);
}

/* Black text on a transparent background reads as black on white, not black on black. */
static void test_transparent_background(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "alpha.png"), &t, err));
  assert_true(contains(t.text, "TRANSPARENT BACKGROUND"));
  ocr_text_free(&t);
}

/* The recognition rules read what OCR made of a licence as unreadable, and nothing else. */
static void assert_unreadable_licence(const ocr_text *t) {
  licence_result r;
  recognize_licence(t->text, t->confidence, NOW, &r);
  assert_string_equal(r.status, "failed");
  assert_int_equal(r.nflags, 1);
  assert_string_equal(r.flags[0], "unreadable");
}

static void test_blank_image(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "blank.png"), &t, err));
  assert_non_null(t.text);
  for (const char *s = t.text; *s; s++) assert_true(*s == ' ' || *s == '\n');
  assert_true(t.confidence < 0.6);
  assert_unreadable_licence(&t);
  ocr_text_free(&t);
}

/* Too small to hold a document (Tesseract refuses some such images outright, which would read
 * as recognition unavailable): no text, so unreadable, not an engine failure. */
static void test_tiny_image(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "tiny.png"), &t, err));
  assert_string_equal(t.text, "");
  assert_true(t.confidence == 0);
  assert_true(contains(err, "too small"));
  assert_unreadable_licence(&t);
  ocr_text_free(&t);
}

static void test_not_an_image(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_image(path_in(p, "notes.png"), &t, err));
  assert_string_equal(t.text, "");
  assert_true(t.confidence == 0);
  assert_true(err[0] != 0);
  ocr_text_free(&t);
}

static void test_missing_file(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_false(ocr_image(path_in(p, "missing.png"), &t, err));
  assert_null(t.text);
  assert_true(contains(err, "missing.png"));
  assert_false(ocr_pdf(path_in(p, "missing.pdf"), &t, err));
  assert_null(t.text);
}

/* ---- PDF ---- */

static void test_pdf_text_layer(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_pdf(path_in(p, "certificate.pdf"), &t, err));
  assert_true(t.confidence == 1.0);
  for (int i = 0; certificate[i]; i++) assert_true(contains(t.text, certificate[i]));
  insurance_result r;
  recognize_insurance(t.text, NOW, &r);
  assert_string_equal(r.status, "active");
  assert_string_equal(r.summary, "State Farm Fire and Casualty Company, policy ABC-123, effective 2026-01-01, "
                                 "expires 2027-01-01, coverage $1,000,000");
  ocr_text_free(&t);
}

static void test_pdf_scan(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_pdf(path_in(p, "scan.pdf"), &t, err));
  check_licence_text(&t);
  assert_true(t.confidence < 1.0);
  ocr_text_free(&t);
}

static void test_pdf_first_three_pages(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_pdf(path_in(p, "four.pdf"), &t, err));
  assert_true(contains(t.text, "PAGE ONE ALPHA BRAVO"));
  assert_true(contains(t.text, "PAGE THREE ECHO FOXTROT"));
  assert_false(contains(t.text, "PAGE FOUR"));
  assert_true(t.confidence == 1.0);
  ocr_text_free(&t);
}

static void test_pdf_damaged(void **state) {
  (void)state;
  char p[256], err[256];
  ocr_text t = {0};
  assert_true(ocr_pdf(path_in(p, "damaged.pdf"), &t, err));
  assert_string_equal(t.text, "");
  assert_true(t.confidence == 0);
  assert_true(err[0] != 0);
  ocr_text_free(&t);
}

/* ---- threads ---- */

typedef struct worker {
  pthread_t tid;
  bool ok;
} worker;

static void *worker_run(void *arg) {
  worker *w = arg;
  char p[256], err[256];
  ocr_text t = {0};
  w->ok = ocr_image(path_in(p, "licence.png"), &t, err) && contains(t.text, "DRIVER LICENSE");
  ocr_text_free(&t);
  return NULL; /* the thread's instance is released as it exits */
}

static void test_threads(void **state) {
  (void)state;
  worker w[2] = {{0}};
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&w[i].tid, NULL, worker_run, &w[i]), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(w[i].tid, NULL), 0);
  assert_true(w[0].ok && w[1].ok);
}

static void test_text_free_twice(void **state) {
  (void)state;
  ocr_text t = {strdup("x"), 0.5};
  ocr_text_free(&t);
  assert_null(t.text);
  ocr_text_free(&t);
  ocr_text_free(NULL);
}

UNIT_MAIN(group_setup, group_teardown, cmocka_unit_test(test_png_licence),
          cmocka_unit_test(test_png_licence_recognised), cmocka_unit_test(test_jpeg_and_webp),
          cmocka_unit_test(test_textured_photo), cmocka_unit_test(test_sideways_photo),
          cmocka_unit_test(test_transparent_background), cmocka_unit_test(test_blank_image),
          cmocka_unit_test(test_tiny_image), cmocka_unit_test(test_not_an_image), cmocka_unit_test(test_missing_file),
          cmocka_unit_test(test_pdf_text_layer), cmocka_unit_test(test_pdf_scan),
          cmocka_unit_test(test_pdf_first_three_pages), cmocka_unit_test(test_pdf_damaged),
          cmocka_unit_test(test_threads), cmocka_unit_test(test_text_free_twice))
