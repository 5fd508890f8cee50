/* Text of uploaded documents: OCR of images with Tesseract (English), and the text of PDFs
 * from their text layer (poppler) or, for scanned PDFs, OCR of the rendered pages.
 * The only module that includes tesseract, leptonica, poppler and cairo headers; the rules that
 * read the text live in domain/providers/recognition.h.
 *
 * Threads: every function may be called from any thread at the same time. Each thread keeps
 * its own Tesseract instance (created on first use, ~0.3 s and ~30 MB), so the callers should
 * be a few long-lived worker threads; the instance is released when its thread exits, or
 * earlier with ocr_thread_release().
 *
 * Time is bounded. Each image or PDF page has OCR_PAGE_MS of the recognising thread's CPU time
 * for all its passes (checked by Tesseract's cancel callback), so how much of a document is
 * read never depends on how busy the machine is. Tesseract's layout analysis does not look at
 * that budget, and on an image of
 * noise it runs for a minute, so with ocr_use_helper() the work runs in helper processes
 * (one per calling thread, kept between documents) that are killed when a document overruns
 * its bound (per image or page, RECOGNITION_TIMEOUT_MS: 5 s by default): the document then
 * reads as unreadable, and a crash of the engine costs only its helper. */
#ifndef EXT_OCR_H
#define EXT_OCR_H
#include <stdbool.h>

#define OCR_PAGE_MS 3000

typedef struct ocr_text {
  char *text;        /* UTF-8, heap (free with ocr_text_free); "" when nothing was read */
  double confidence; /* 0..1, Tesseract's mean confidence / 100; 1.0 for a PDF text layer */
} ocr_text;

/* OCR of an image file (PNG, JPEG, WebP, and whatever else leptonica decodes), English.
 * An image that reads with confidence below 0.6 is read again turned by 90, 270 and 180
 * degrees (a photo taken sideways), and the best reading is kept. On true, *out owns the text. A file that cannot be
 * decoded, or is larger than 64 megapixels, is not an engine failure: it returns true with text "" and confidence 0
 * (the document is unreadable), with the reason in err. Returns false, with the reason in err, only when recognition is
 * unavailable: the file cannot be opened (storage), Tesseract has no English language data, or memory ran out; *out is
 * then empty. Slow (0.1-1 s of one core per pass): call it from a worker thread, never from a request handler. */
bool ocr_image(const char *path, ocr_text *out, char err[256]);

/* Text of a PDF, from its first 3 pages. A page with a text layer gives that text with
 * confidence 1.0; a page without one (a scan) is rendered with cairo at 300 dpi and OCR'd
 * like an image.
 * The confidence of the whole is the mean of the pages' confidences weighted by the number
 * of letters and digits each page gave. A damaged or password-protected PDF, or one whose text
 * passes 16 MiB, returns true with text "" and confidence 0, the reason in err; false means recognition is unavailable,
 * as for ocr_image. */
bool ocr_pdf(const char *path, ocr_text *out, char err[256]);

/* ocr_image and ocr_pdf in the calling thread whatever ocr_use_helper said (what a helper
 * runs; tests), in the media library (ext/media.h), loaded by the first call: when it cannot
 * be, recognition is unavailable. */
bool ocr_image_here(const char *path, ocr_text *out, char err[256]);
bool ocr_pdf_here(const char *path, ocr_text *out, char err[256]);

/* From now on ocr_image and ocr_pdf run in helper processes started as `exe ocr-helper`
 * (exe: this program, e.g. "/proc/self/exe"), killed past page_limit_ms per image or PDF page.
 * Call once at start-up, before any recognition. */
void ocr_use_helper(const char *exe, int page_limit_ms);
/* At shutdown: kills the helpers reading a document now, and refuses every later document.
 * Their callers' ocr_image and ocr_pdf return false (recognition unavailable) at once, and
 * ocr_interrupted() then tells them apart from a document's failure. */
void ocr_interrupt(void);
bool ocr_interrupted(void);

/* The helper's loop (the `ocr-helper` command): a request per line on standard input, "I
 * <path>" or "P <path>"; per request an answer on standard output, "<ok> <confidence>
 * <length>\n" then length bytes (the text, or the error). Returns at end of input. */
int ocr_helper_main(void);

/* Frees the text and empties *t; safe on an empty or already freed value. */
void ocr_text_free(ocr_text *t);

/* Releases the calling thread's Tesseract instance now instead of at thread exit (the main
 * thread's instance is never released otherwise). The next call creates a new one. */
void ocr_thread_release(void);

#endif
