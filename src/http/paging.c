/* Paging's HTTP side (paging.h): the two query fields, cursors and their MAC, the Link header.
 * The statements are db/page.c's. */
#include "http/paging.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/digest.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAC_HEX 32 /* 128 bits */

static char mac_key[65];
static pthread_once_t mac_once = PTHREAD_ONCE_INIT;

static void mac_key_init(void) { secret_derive_hex("page-cursor", mac_key); }

/* The MAC of a cursor's values (JSON text) for this list, path and caller: 32 hex digits. */
static void cursor_mac(hs_req *req, const db_page *pg, const char *values, char out[MAC_HEX + 1]) {
  pthread_once(&mac_once, mac_key_init);
  char *text = arena_printf(&req->arena, "%s\n%s\n%s\n%s\n%s\n%s", pg->ks->list, req->path, pg->scope ? pg->scope : "",
                            req->auth.role ? req->auth.role : "", req->auth.id ? req->auth.id : "", values);
  char full[65];
  hmac_sha256_hex(mac_key, 64, text, strlen(text), full);
  memcpy(out, full, MAC_HEX);
  out[MAC_HEX] = 0;
}

static const hs_field page_fields[] = {HS_PAGE_FIELDS, {0}};
const hs_schema HS_PAGE_QUERY = {page_fields};

/* The key in a cursor, checked against its MAC and the keyset's parts; false when it is not
 * one this list made for this caller. */
static bool cursor_read(hs_req *req, db_page *pg, const char *cursor) {
  const db_keyset *ks = pg->ks;
  const char *dot = strrchr(cursor, '.');
  if (!dot || strlen(dot + 1) != MAC_HEX) return false;
  size_t chars = (size_t)(dot - cursor);
  unsigned char *json = arena_alloc(&req->arena, chars * 3 / 4 + 1);
  size_t len;
  if (!b64url_decode(cursor, chars, json, chars * 3 / 4, &len)) return false;
  json[len] = 0;
  char mac[MAC_HEX + 1];
  cursor_mac(req, pg, (const char *)json, mac);
  if (!digest_equal(mac, dot + 1)) return false;
  json_t *values = arena_json(&req->arena, json_loadb((const char *)json, len, 0, NULL));
  int parts = db_keyset_parts(ks);
  if (!json_is_array(values) || json_array_size(values) != (size_t)parts + (ks->snapshot ? 1 : 0)) return false;
  if (ks->snapshot) { /* the first page's bound, after the key */
    json_t *s = json_array_get(values, (size_t)parts);
    if (!json_is_integer(s) || json_integer_value(s) <= 0) return false;
    pg->snapshot = json_integer_value(s);
  }
  for (int i = 0; i < parts; i++) {
    json_t *v = json_array_get(values, (size_t)i);
    if (ks->parts[i].type == 'i' && json_is_integer(v))
      pg->key[i] = DB_INT(json_integer_value(v));
    else if (ks->parts[i].type == 's' && json_is_string(v))
      pg->key[i] = DB_TEXT(arena_strdup(&req->arena, json_string_value(v)));
    else
      return false;
  }
  pg->nkey = parts;
  return true;
}

err_t hs_page_begin(hs_req *req, const db_keyset *ks, const char *scope, int cap, db_page *pg) {
  *pg = (db_page){.ks = ks, .scope = scope};
  json_t *limit = json_object_get(req->query, "limit");
  const char *cursor = json_string_value(json_object_get(req->query, "cursor"));
  if (cursor && !cursor_read(req, pg, cursor)) return hs_fail_invalid(req, "cursor: is not valid");
  if (limit || cursor) pg->limit = limit ? (int)json_integer_value(limit) : HS_PAGE_MAX;
  pg->fetch = pg->limit ? pg->limit + 1 : cap;
  return ERR_OK;
}

/* Appends s percent-encoded (RFC 3986: unreserved characters as they are). */
static void add_escaped(struct buf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("-._~", c))
      buf_addn(b, s, 1);
    else
      buf_addf(b, "%%%02X", c);
  }
}

/* Appends a validated query value: text, a number, a boolean, or a list (items joined by ','). */
static void add_value(struct buf *b, json_t *v) {
  if (json_is_array(v)) {
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) {
      if (i) buf_add(b, "%2C");
      add_value(b, item);
    }
  } else if (json_is_string(v)) {
    add_escaped(b, json_string_value(v));
  } else if (json_is_integer(v)) {
    buf_addf(b, "%lld", (long long)json_integer_value(v));
  } else if (json_is_real(v)) {
    buf_addf(b, "%.17g", json_real_value(v));
  } else if (json_is_boolean(v)) {
    buf_add(b, json_is_true(v) ? "true" : "false");
  }
}

/* The request's URL under PUBLIC_URL with its validated query (the route's declared fields as
 * parsed, never the raw query string) but `cursor`, then cursor=<next>. */
static const char *next_url(hs_req *req, const char *next) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  buf_addf(&b, "%s%s?", CFG.public_url, req->path);
  const char *key;
  json_t *v;
  json_object_foreach(req->query, key, v) {
    if (!strcmp(key, "cursor")) continue;
    add_escaped(&b, key);
    buf_add(&b, "=");
    add_value(&b, v);
    buf_add(&b, "&");
  }
  buf_addf(&b, "cursor=%s", next);
  if (buf_result(&b) != BUF_OK) oom();
  const char *url = arena_strdup(&req->arena, buf_ptr(&b));
  buf_free(&b);
  return url;
}

err_t hs_page_next_after(hs_req *req, db_page *pg, const db_res *r, int row) {
  const db_keyset *ks = pg->ks;
  json_t *values = arena_json(&req->arena, json_array());
  for (int i = 0; i < db_keyset_parts(ks); i++) {
    int col = db_col(r, ks->parts[i].column);
    if (col < 0 || db_isnull(r, row, col)) { /* the list's statement does not hold its key */
      log_msg(LOG_ERROR, "list %s: key column %s missing or NULL", ks->list, ks->parts[i].column);
      return hs_fail(req, ERR_INTERNAL, NULL);
    }
    json_array_append_new(values, ks->parts[i].type == 'i' ? json_integer(db_int(r, row, col))
                                                           : json_string(db_text(r, row, col)));
  }
  if (ks->snapshot) { /* carried on from the first page, else read there */
    int col = db_col(r, ks->snapshot);
    int64_t bound = pg->snapshot ? pg->snapshot : col >= 0 ? db_int(r, row, col) : 0;
    if (bound <= 0) {
      log_msg(LOG_ERROR, "list %s: snapshot column %s missing or not positive", ks->list, ks->snapshot);
      return hs_fail(req, ERR_INTERNAL, NULL);
    }
    json_array_append_new(values, json_integer(bound));
  }
  char *text = json_dumps(values, JSON_COMPACT);
  size_t len = strlen(text);
  char mac[MAC_HEX + 1];
  cursor_mac(req, pg, text, mac);
  char *cursor = arena_alloc(&req->arena, len * 4 / 3 + 4 + 1 + MAC_HEX + 1);
  size_t chars = b64url_encode((const unsigned char *)text, len, cursor);
  cursor[chars] = '.';
  memcpy(cursor + chars + 1, mac, MAC_HEX + 1);
  free(text);
  pg->next = cursor;
  req->res_link = arena_printf(&req->arena, "<%s>; rel=\"next\"", next_url(req, cursor));
  return ERR_OK;
}

err_t hs_page_end(hs_req *req, db_page *pg, db_res *r) {
  if (!pg->limit || r->rows <= pg->limit) return ERR_OK;
  r->rows = pg->limit;
  return hs_page_next_after(req, pg, r, r->rows - 1);
}

err_t hs_page_rows(hs_req *req, const db_keyset *ks, int cap, hs_page_read read, const char *subject, db_page *pg,
                   db_res **r) {
  err_t e = hs_page_begin(req, ks, NULL, cap, pg);
  if (!e) e = read(&req->arena, subject, pg, r);
  return e ? e : hs_page_end(req, pg, *r);
}

err_t hs_ok_page_jw(hs_req *req, const db_keyset *ks, int cap, hs_page_read read, const char *subject,
                    hs_page_writer write, size_t row_hint) {
  db_page pg;
  db_res *r;
  err_t e = hs_page_rows(req, ks, cap, read, subject, &pg, &r);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, row_hint * (size_t)(r->rows + 1));
  jw_arr(w);
  if ((e = write(req, w, r)) != ERR_OK) return e;
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

void hs_page_jw_next(jw *w, const db_page *pg) {
  if (!pg->next) return;
  jw_key_str(w, "nextCursor", pg->next);
}
