/* A streaming multipart/form-data parser (RFC 7578 over RFC 2046's framing), a pure function
 * of the bytes it is fed: no sockets, no files, no globals. The server feeds it each piece of a
 * body as it arrives; a fuzzer feeds it arbitrary bytes in arbitrary pieces. Whatever the
 * pieces, the parts come out the same (the fuzzer checks that).
 *
 * Each part with a name is reported through the callback as pieces of its value, with the
 * offset of the piece in the value: the first call of a part has offset 0, and a part whose
 * value is empty gets exactly one call (offset 0, size 0). filename is NULL for a text field
 * and the (possibly empty) file name for a file. Parts without a name are skipped. One parser
 * belongs to one body and is used by one thread at a time. */
#ifndef HTTP_MULTIPART_H
#define HTTP_MULTIPART_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hs_multipart hs_multipart;
typedef void (*hs_part_fn)(void *cls, const char *name, const char *filename, const char *data, uint64_t off,
                           size_t size);

/* Longest boundary RFC 2046 allows, and the largest header block of one part. */
#define HS_MULTIPART_MAX_BOUNDARY 70
#define HS_MULTIPART_MAX_HEADERS (8 * 1024)

/* Writes the boundary of a `multipart/form-data; boundary=...` Content-Type into out (71
 * bytes); false when content_type is NULL, another type, or has no usable boundary. */
bool hs_multipart_boundary(const char *content_type, char out[HS_MULTIPART_MAX_BOUNDARY + 1]);
/* A parser for a body of content_type (heap; hs_multipart_free), or NULL when the type is not
 * multipart/form-data with a boundary. */
hs_multipart *hs_multipart_new(const char *content_type, hs_part_fn fn, void *cls);
/* Parses the next len bytes of the body. False once the body is malformed (the parser then
 * ignores the rest). */
bool hs_multipart_feed(hs_multipart *m, const char *data, size_t len);
/* After the last byte: true when the body was well formed up to its closing boundary. */
bool hs_multipart_finish(hs_multipart *m);
void hs_multipart_free(hs_multipart *m);

#endif
