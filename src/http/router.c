/* Each pattern is split into segments once. A request path is split into at most
 * HS_MAX_SEGMENTS segments and compared against every row of the same length; among the
 * rows that match, the one whose static segments come earliest wins (compared left to
 * right), so GET /jobs/reportable beats GET /jobs/:id whatever the table order. A last
 * segment `*name` takes the rest of the path (one segment or more, joined by '/'): the
 * portal's addresses, which the browser app routes itself; any other row that matches wins
 * over it. */
#include "http/router.h"
#include "core/config.h"
#include "core/util.h"
#include <stdatomic.h>
#include <string.h>

typedef struct compiled {
  const hs_route *route;
  int nseg;
  char *seg[HS_MAX_SEGMENTS];
  bool is_param[HS_MAX_SEGMENTS];
  unsigned static_mask; /* bit (nseg-1-i) set when segment i is static: higher wins */
  bool rest;            /* the last segment is `*name`: it takes the rest of the path */
  _Atomic long hits, ok;
} compiled;

static compiled *table;
static size_t ntable;
static hs_route *rows;

int hs_method_bit(const char *m) {
  switch (m[0]) {
  case 'G': return strcmp(m, "GET") ? 0 : HS_GET;
  case 'P': return !strcmp(m, "POST") ? HS_POST : !strcmp(m, "PUT") ? HS_PUT : !strcmp(m, "PATCH") ? HS_PATCH : 0;
  case 'D': return strcmp(m, "DELETE") ? 0 : HS_DELETE;
  default: return 0;
  }
}

const char *hs_method_name(int bit) {
  switch (bit) {
  case HS_GET: return "GET";
  case HS_POST: return "POST";
  case HS_PUT: return "PUT";
  case HS_PATCH: return "PATCH";
  case HS_DELETE: return "DELETE";
  default: return "?";
  }
}

/* Splits path into segments (pointers into buf, a copy). Empty segments are skipped, so
 * "/jobs/" is "/jobs". Returns -1 when the path is too long or has too many segments. */
static int split_request(const char *path, char *buf, size_t cap, char *seg[HS_MAX_SEGMENTS]) {
  if (strlen(path) >= cap) return -1;
  strcpy(buf, path);
  char *save = NULL;
  int n = 0;
  for (char *p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
    if (n == HS_MAX_SEGMENTS) return -1;
    seg[n++] = p;
  }
  return n;
}

/* A row's error list holds real error codes, each once (dies naming the row otherwise). */
static void check_errors(const hs_route *r) {
  for (const err_t *e = r->errors; e && *e != ERR_OK; e++) {
    if (*e < ERR_BAD_REQUEST || *e >= ERR_COUNT || err_status(*e) < 400)
      die("route %s %s: %d is not an error code", hs_method_name(r->method), r->path, (int)*e);
    for (const err_t *f = r->errors; f != e; f++)
      if (*f == *e) die("route %s %s: error %d listed twice", hs_method_name(r->method), r->path, err_status(*e));
  }
}

void hs_router_build(const hs_route *routes, size_t n) {
  for (size_t i = 0; i < n; i++) check_errors(&routes[i]);
  rows = xcalloc(n, sizeof *rows);
  memcpy(rows, routes, n * sizeof *rows);
  table = xcalloc(n, sizeof *table);
  ntable = n;
  for (size_t i = 0; i < n; i++) {
    compiled *c = &table[i];
    c->route = &rows[i];
    char buf[2048];
    c->nseg = split_request(rows[i].path, buf, sizeof buf, c->seg);
    if (c->nseg < 0 || rows[i].path[0] != '/') die("bad route pattern %s", rows[i].path);
    for (int s = 0; s < c->nseg; s++) {
      c->seg[s] = xstrdup(c->seg[s]);
      c->is_param[s] = c->seg[s][0] == ':' || c->seg[s][0] == '*';
      if (c->seg[s][0] == '*') {
        if (s != c->nseg - 1) die("bad route pattern %s: *%s is not last", rows[i].path, c->seg[s] + 1);
        c->rest = true;
      }
      if (!c->is_param[s]) c->static_mask |= 1u << (c->nseg - 1 - s);
    }
    for (size_t j = 0; j < i; j++)
      if (table[j].route->method == rows[i].method && !strcmp(table[j].route->path, rows[i].path))
        die("duplicate route %s %s", hs_method_name(rows[i].method), rows[i].path);
  }
}

bool hs_route_available(const hs_route *r) {
  if ((r->flags & ROUTE_TEST_ONLY) && CFG.env != ENV_TEST) return false;
  return !((r->flags & ROUTE_DEV_ONLY) && CFG.env == ENV_PRODUCTION);
}

static bool segments_match(const compiled *c, char *const seg[], int nseg) {
  if ((c->rest ? nseg < c->nseg : c->nseg != nseg) || !hs_route_available(c->route)) return false;
  for (int s = 0; s < c->nseg; s++) /* a `*rest` row: the segments past its last are the rest */
    if (!c->is_param[s] && strcmp(c->seg[s], seg[s])) return false;
  return true;
}

const hs_route *hs_router_match(int method, const char *path, hs_req *req) {
  char buf[2048], *seg[HS_MAX_SEGMENTS];
  int nseg = split_request(path, buf, sizeof buf, seg);
  if (nseg < 0) return NULL;
  const compiled *best = NULL;
  for (size_t i = 0; i < ntable; i++) {
    const compiled *c = &table[i];
    if (c->route->method != method || !segments_match(c, seg, nseg)) continue;
    if (!best || (best->rest && !c->rest) ||
        (best->rest == c->rest &&
         (c->static_mask > best->static_mask || (c->static_mask == best->static_mask && c->nseg > best->nseg))))
      best = c;
  }
  if (!best) return NULL;
  req->nparams = 0;
  for (int s = 0; s < best->nseg && req->nparams < HS_MAX_PARAMS; s++) {
    if (!best->is_param[s]) continue;
    req->param_names[req->nparams] = best->seg[s] + 1;
    if (best->rest && s == best->nseg - 1) { /* the rest, joined again */
      size_t len = 0;
      for (int t = s; t < nseg; t++) len += strlen(seg[t]) + 1;
      char *v = arena_alloc(&req->arena, len), *o = v;
      for (int t = s; t < nseg; t++) o += sprintf(o, "%s%s", t > s ? "/" : "", seg[t]);
      req->param_values[req->nparams++] = v;
    } else {
      req->param_values[req->nparams++] = arena_strdup(&req->arena, seg[s]);
    }
  }
  return best->route;
}

static int hex_digit(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

/* Decodes s[0..n) into out (at least n + 1 bytes); returns the decoded length. */
static size_t query_unescape(const char *s, size_t n, char *out) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    int hi, lo;
    if (s[i] == '+') {
      out[w++] = ' ';
    } else if (s[i] == '%' && i + 2 < n && (hi = hex_digit(s[i + 1])) >= 0 && (lo = hex_digit(s[i + 2])) >= 0) {
      out[w++] = (char)(hi << 4 | lo);
      i += 2;
    } else {
      out[w++] = s[i];
    }
  }
  out[w] = 0;
  return w;
}

void hs_query_parse(const char *query, json_t *args) {
  if (!query) return;
  size_t cap = strlen(query) + 1;
  char *key = xmalloc(cap), *value = xmalloc(cap);
  for (const char *p = query; *p;) {
    const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    size_t klen = query_unescape(p, (size_t)((eq ? eq : end) - p), key);
    size_t vlen = eq ? query_unescape(eq + 1, (size_t)(end - eq - 1), value) : (value[0] = 0, 0);
    json_t *v = strlen(key) == klen && strlen(value) == vlen ? json_stringn(value, vlen) : NULL;
    json_t *had = v ? json_object_get(args, key) : NULL;
    if (json_is_array(had))
      json_array_append_new(had, v);
    else if (had) /* the second of a key: the list of its values (validation decides) */
      json_object_set_new(args, key, json_pack("[O,o]", had, v));
    else if (v)
      json_object_set_new(args, key, v); /* refuses a key that is not UTF-8 */
    p = amp ? amp + 1 : end;
  }
  free(key), free(value);
}

int hs_router_methods(const char *path) {
  char buf[2048], *seg[HS_MAX_SEGMENTS];
  int nseg = split_request(path, buf, sizeof buf, seg), methods = 0;
  for (size_t i = 0; nseg >= 0 && i < ntable; i++)
    if (segments_match(&table[i], seg, nseg)) methods |= table[i].route->method;
  return methods;
}

const hs_route *hs_router_routes(size_t *n) {
  *n = ntable;
  return rows;
}

void hs_router_count(const hs_route *r, int status) {
  compiled *c = &table[r - rows];
  atomic_fetch_add(&c->hits, 1);
  if (status < 400) atomic_fetch_add(&c->ok, 1);
}

void hs_router_counts(size_t i, long *hits, long *ok) {
  *hits = atomic_load(&table[i].hits);
  *ok = atomic_load(&table[i].ok);
}
