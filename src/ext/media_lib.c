/* The media library's table (ext/media.h): its one exported symbol. The library's objects are
 * built with hidden visibility, so its own copies of core's helpers stay its own. */
#include "ext/media.h"

__attribute__((visibility("default"))) const media_api marketplace_media = {
    .version = MEDIA_API_VERSION,
    .fini = media_thumbnail_fini,
    .thumbnail_size = media_thumbnail_size,
    .thumbnail_webp = media_thumbnail_webp,
    .photobook_make = media_photobook_make,
    .ocr_image = media_ocr_image,
    .ocr_pdf = media_ocr_pdf,
    .ocr_thread_release = media_ocr_thread_release,
};
