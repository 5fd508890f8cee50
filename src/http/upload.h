/* multipart/form-data reception for upload routes (hs_route.upload), inside the HTTP layer.
 *
 * The server feeds the callbacks of our multipart parser (http/multipart.h) to hs_form_data(); this
 * module turns them into parts: file parts are streamed to temporary files (removed with the
 * request unless a handler moves them into storage), declared text fields are collected, and
 * every limit is enforced as the bytes arrive. hs_form_finish() then reports the first
 * problem, checks the files' types from their bytes, strips photo metadata and validates the
 * text fields; a request with an Idempotency-Key also gets each file's SHA-256 as received. One hs_form belongs to one
 * request and is used by one thread at a time. */
#ifndef HTTP_UPLOAD_H
#define HTTP_UPLOAD_H
#include "http/http.h"
#include <stddef.h>
#include <stdint.h>

typedef struct hs_form hs_form;

/* The largest body an upload route admits: its files' limits plus 1 MiB of framing and text. */
size_t hs_form_body_limit(const hs_upload_spec *spec);
/* Starts the reception of req's multipart body (req->route->upload), in req's arena. */
hs_form *hs_form_new(hs_req *req);
/* One parser callback: size bytes at offset off of the part named key (filename NULL for a
 * text field). A part begins at offset 0; the parser may announce it with an empty call
 * before its first bytes, which continues the same part. Never fails: problems are kept
 * for hs_form_finish(). */
void hs_form_data(hs_form *f, const char *key, const char *filename, const char *data, uint64_t off, size_t size);
/* The parser refused the body, or it ended before the closing boundary. */
void hs_form_malformed(hs_form *f);
/* After the whole body: closes the last part, then fails req with the first problem (400,
 * 413 or 500), or sets req->uploads and req->body (the validated text fields). */
err_t hs_form_finish(hs_form *f);

#endif
