/* Row descriptors (rowjson.h): one switch over the cell kinds, shared by every answer. */
#include "http/rowjson.h"
#include "ext/storage.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

hs_rj *hs_rj_bind_as(arena *a, const hs_rj_field *fields, const db_res *r, const char *prefix) {
  hs_rj *b = arena_alloc(a, sizeof *b);
  while (fields[b->n].key) b->n++;
  b->fields = fields;
  b->col = arena_alloc(a, sizeof *b->col * (size_t)(b->n ? b->n : 1));
  b->sub = arena_alloc(a, sizeof *b->sub * (size_t)(b->n ? b->n : 1));
  for (int i = 0; i < b->n; i++) {
    b->sub[i] = NULL;
    if (fields[i].kind == RJ_OBJECT || fields[i].kind == RJ_INCLUDE) {
      b->col[i] = -1;
      b->sub[i] =
          hs_rj_bind_as(a, fields[i].fields, r, arena_printf(a, "%s%s", prefix ? prefix : "", fields[i].column));
      continue;
    }
    if (!prefix) {
      b->col[i] = db_col(r, fields[i].column);
      continue;
    }
    char name[128];
    size_t np = strlen(prefix), nc = strlen(fields[i].column);
    if (np + nc >= sizeof name) {
      b->col[i] = -1;
      continue;
    }
    memcpy(name, prefix, np), memcpy(name + np, fields[i].column, nc + 1);
    b->col[i] = db_col(r, name);
  }
  return b;
}

hs_rj *hs_rj_bind(arena *a, const hs_rj_field *fields, const db_res *r) { return hs_rj_bind_as(a, fields, r, NULL); }

static void json_clean(jw *w, const char *text) {
  json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
  char *clean = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;
  if (clean)
    jw_raw_value(w, clean, strlen(clean));
  else
    jw_null(w);
  free(clean);
  json_decref(v);
}

void hs_rj_cell(jw *w, hs_rj_kind kind, const char *cell, size_t len) {
  switch (kind) {
  case RJ_STR: cell ? jw_strn(w, cell, len) : jw_null(w); break;
  case RJ_INT: jw_cell_int(w, cell); break;
  case RJ_REAL: jw_cell_real(w, cell); break;
  case RJ_BOOL: jw_cell_bool(w, cell); break;
  case RJ_MONEY: jw_cell_money(w, cell); break;
  case RJ_ISO: jw_cell_iso(w, cell); break;
  case RJ_JSON: jw_json(w, cell); break;
  case RJ_JSON_CLEAN: json_clean(w, cell); break;
  case RJ_URL: storage_url_jw(w, cell, URL_TTL_PHOTO); break;
  case RJ_URLS: storage_urls_jw(w, cell, URL_TTL_PHOTO); break;
  case RJ_URL_DOC: storage_url_jw(w, cell, URL_TTL_DOCUMENT); break;
  case RJ_LIST: jw_json(w, cell ? cell : "[]"); break;
  case RJ_FN:
  case RJ_OBJECT:
  case RJ_INCLUDE: jw_null(w); break; /* written by hs_rj_members, which knows the row */
  }
}

static bool is_link(hs_rj_kind kind) { return kind == RJ_URL || kind == RJ_URLS || kind == RJ_URL_DOC; }

/* The links an object wrote (its included tables' too), for its one `variants` member. */
typedef struct links_seen {
  int64_t expires[2]; /* photo, document: the links of one object share their expiry, read from
                         the clock once, so each original's link in `variants` is the one
                         written in its member */
  const char *cell[32];
  int doc[32], n;
} links_seen;

static void members(jw *w, const hs_rj *b, const db_res *r, int row, links_seen *seen) {
  for (int i = 0; i < b->n; i++) {
    hs_rj_kind kind = b->fields[i].kind;
    const char *cell = db_text(r, row, b->col[i]);
    if (kind == RJ_INCLUDE) {
      members(w, b->sub[i], r, row, seen);
      continue;
    }
    jw_key(w, b->fields[i].key);
    if (b->sub[i])
      hs_rj_object(w, b->sub[i], r, row);
    else if (kind == RJ_FN)
      b->fields[i].write(w, r, row, cell);
    else if (!is_link(kind))
      hs_rj_cell(w, kind, cell, db_len(r, row, b->col[i]));
    else {
      int doc = kind == RJ_URL_DOC;
      bool empty = !cell || !strcmp(cell, "[]");
      if (!seen->expires[doc] && !empty)
        seen->expires[doc] = storage_url_expiry(doc ? URL_TTL_DOCUMENT : URL_TTL_PHOTO);
      if (kind == RJ_URLS)
        storage_urls_jw_at(w, cell, seen->expires[doc]);
      else
        storage_url_jw_at(w, cell, seen->expires[doc]);
      if (!empty && seen->n < (int)(sizeof seen->cell / sizeof *seen->cell))
        seen->cell[seen->n] = cell, seen->doc[seen->n++] = doc;
    }
  }
}

void hs_rj_members(jw *w, const hs_rj *b, const db_res *r, int row) {
  links_seen seen = {.n = 0};
  members(w, b, r, row, &seen);
  bool any = false; /* the member only where some image has variants */
  for (int i = 0; !any && i < seen.n; i++) any = storage_has_variants(seen.cell[i]);
  if (!any) return;
  storage_variants_open(w);
  for (int i = 0; i < seen.n; i++) storage_variants_add(w, seen.cell[i], seen.expires[seen.doc[i]]);
  storage_variants_close(w);
}

void hs_rj_open(jw *w, const char *key, const hs_rj *b, const db_res *r, int row) {
  jw_key(w, key);
  jw_obj(w);
  hs_rj_members(w, b, r, row);
}

void hs_rj_object(jw *w, const hs_rj *b, const db_res *r, int row) {
  jw_obj(w);
  hs_rj_members(w, b, r, row);
  jw_obj_end(w);
}

void hs_rj_array(jw *w, arena *a, const hs_rj_field *fields, const db_res *r) {
  hs_rj *b = hs_rj_bind(a, fields, r);
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) hs_rj_object(w, b, r, i);
  jw_arr_end(w);
}

err_t hs_ok_rows(hs_req *req, const hs_rj_field *fields, const db_res *r, size_t row_hint) {
  jw *w = hs_jw(req, row_hint * (size_t)(r->rows + 1));
  hs_rj_array(w, &req->arena, fields, r);
  return hs_ok_jw(req, w);
}

err_t hs_ok_row(hs_req *req, const hs_rj_field *fields, const db_res *r) {
  jw *w = hs_jw(req, 512);
  hs_rj_object(w, hs_rj_bind(&req->arena, fields, r), r, 0);
  return hs_ok_jw(req, w);
}

err_t hs_ok_page(hs_req *req, const db_keyset *ks, int cap, hs_page_read read, const char *subject,
                 const hs_rj_field *fields, size_t row_hint) {
  db_page pg;
  db_res *r;
  err_t e = hs_page_rows(req, ks, cap, read, subject, &pg, &r);
  return e ? e : hs_ok_rows(req, fields, r, row_hint);
}
