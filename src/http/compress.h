/* gzip for JSON answers (zlib). Answers of HS_GZIP_MIN bytes or more are compressed when the
 * request's Accept-Encoding admits gzip; smaller ones gain too little to pay for the CPU. */
#ifndef HTTP_COMPRESS_H
#define HTTP_COMPRESS_H
#include <stdbool.h>
#include <stddef.h>

#define HS_GZIP_MIN 1024

/* True when an Accept-Encoding value admits gzip: `gzip` (or `x-gzip`) or `*` with a q-value
 * above 0, unless gzip itself is given q=0. NULL admits nothing. */
bool hs_accepts_gzip(const char *accept_encoding);
/* The gzip member of data (heap, free()), its size in *out_len; NULL on failure. */
char *hs_gzip(const char *data, size_t len, size_t *out_len);

#endif
