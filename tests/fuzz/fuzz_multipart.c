/* multipart/form-data: the streaming parser (http/multipart.c) fed in random pieces, then the
 * parts through the upload reception of a real upload route (http/upload.c: temporary files,
 * limits, type sniffing, metadata stripping). Input: a seed byte, the Content-Type value, a
 * newline, the body. Properties: every part's pieces arrive at consecutive offsets, and the
 * parts, their values and the verdict are the same whether the body comes in one piece or in
 * many. */
#include "core/arena.h"
#include "ext/filetype.h"
#include "fuzz.h"
#include "http/http.h"
#include "http/multipart.h"
#include "http/router.h"
#include "http/upload.h"
#include "domains.h"
#include <string.h>

typedef struct part {
  char *name, *filename;
  bool has_filename;
  char *value;
  size_t len;
} part;

typedef struct record {
  part *parts;
  size_t n, cap;
  hs_form *form; /* also forwarded here when set */
} record;

static const hs_route *upload_routes[32];
static size_t nupload;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fuzz_setup();
  if (!filetype_init()) abort();
  domains_install_routes();
  size_t n;
  const hs_route *routes = hs_router_routes(&n);
  for (size_t i = 0; i < n && nupload < 32; i++)
    if (routes[i].upload) upload_routes[nupload++] = &routes[i];
  return 0;
}

static void on_part(void *cls, const char *name, const char *filename, const char *data, uint64_t off, size_t size) {
  record *r = cls;
  if (off == 0) {
    if (r->n == r->cap) r->cap = r->cap ? r->cap * 2 : 8, r->parts = realloc(r->parts, r->cap * sizeof *r->parts);
    r->parts[r->n++] = (part){strdup(name), filename ? strdup(filename) : NULL, filename != NULL, NULL, 0};
  }
  FUZZ_CHECK(r->n > 0, "a piece at offset %llu before any part", (unsigned long long)off);
  part *p = &r->parts[r->n - 1];
  FUZZ_CHECK(off == p->len, "piece at offset %llu after %zu bytes", (unsigned long long)off, p->len);
  FUZZ_CHECK(size > 0 || off == 0, "an empty piece inside a part");
  p->value = realloc(p->value, p->len + size + 1);
  if (size) memcpy(p->value + p->len, data, size);
  p->len += size;
  if (r->form) hs_form_data(r->form, name, filename, data, off, size);
}

static void record_free(record *r) {
  for (size_t i = 0; i < r->n; i++) free(r->parts[i].name), free(r->parts[i].filename), free(r->parts[i].value);
  free(r->parts);
}

static uint32_t next(uint32_t *s) {
  *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
  return *s;
}

/* Parses body in pieces (max_piece 0: one piece); returns the verdict. */
static bool parse(const char *ctype, const uint8_t *body, size_t len, uint32_t seed, size_t max_piece, record *r) {
  hs_multipart *m = hs_multipart_new(ctype, on_part, r);
  if (!m) return false;
  bool fed = true;
  for (size_t at = 0; at < len && fed;) {
    size_t piece = max_piece ? 1 + next(&seed) % max_piece : len;
    if (piece > len - at) piece = len - at;
    fed = hs_multipart_feed(m, (const char *)body + at, piece);
    at += piece;
  }
  bool ok = fed && hs_multipart_finish(m);
  hs_multipart_free(m);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  uint32_t seed = data[0] * 2654435761u + 1;
  const uint8_t *nl = memchr(data + 1, '\n', size - 1);
  if (!nl) return 0;
  char *ctype = fuzz_strndup(data + 1, (size_t)(nl - data - 1));
  const uint8_t *body = nl + 1;
  size_t len = size - (size_t)(body - data);

  record whole = {0}, pieces = {0};
  bool a = parse(ctype, body, len, seed, 0, &whole);
  hs_req req;
  memset(&req, 0, sizeof req);
  arena_init(&req.arena);
  req.res_fd = -1;
  if (nupload) {
    req.route = upload_routes[data[0] % nupload];
    pieces.form = hs_form_new(&req);
  }
  bool b = parse(ctype, body, len, seed, 1 + data[0] % 97, &pieces);
  FUZZ_CHECK(a == b, "verdict %d in one piece, %d in pieces", a, b);
  FUZZ_CHECK(whole.n == pieces.n, "%zu parts in one piece, %zu in pieces", whole.n, pieces.n);
  for (size_t i = 0; i < whole.n; i++) {
    part *x = &whole.parts[i], *y = &pieces.parts[i];
    FUZZ_CHECK(!strcmp(x->name, y->name) && x->has_filename == y->has_filename, "part %zu differs", i);
    FUZZ_CHECK(!x->has_filename || !strcmp(x->filename, y->filename), "part %zu's file name differs", i);
    FUZZ_CHECK(x->len == y->len && !memcmp(x->value, y->value, x->len), "part %zu's value differs", i);
  }
  if (pieces.form) {
    if (!b) hs_form_malformed(pieces.form);
    hs_form_finish(pieces.form);
  }
  arena_fini(&req.arena);
  record_free(&whole);
  record_free(&pieces);
  free(ctype);
  return 0;
}
