/* Shared domain vocabulary, the all-or-none storing of a request's files, the keys stored
 * cells name, and the HTML pages of emailed links. */
#include "domain/common.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/storage.h"
#include "ext/token.h"
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const SERVICE_NAMES[] = {"lawncare", "snowplowing", "handyman", "home_cleaning", NULL};
const char *const JOB_STATUS_NAMES[] = {"PENDING",     "QUOTED",    "ACCEPTED",  "ON_THE_WAY",
                                        "IN_PROGRESS", "COMPLETED", "CANCELLED", NULL};

static const hs_field login_fields[] = {
    {"email", F_EMAIL, F_REQUIRED},
    {"password", F_STRING, F_REQUIRED, LEN(1, 1024)},
    {0},
};
const hs_schema common_login_schema = {login_fields};

const hs_field common_zip_item = {"serviceZips", F_ZIP};
const hs_field common_service_item = {"services", F_ENUM, .choices = SERVICE_NAMES};

bool common_store_uploads(hs_upload **files, int n, json_t *keys) {
  size_t before = json_array_size(keys);
  for (int i = 0; i < n; i++) {
    char key[STORAGE_KEY_LEN], err[256];
    if (!storage_save(files[i]->path, files[i]->ext, files[i]->mime, key, err)) {
      log_msg(LOG_ERROR, "storing an upload failed: %s", err);
      while (json_array_size(keys) > before) {
        storage_delete(json_string_value(json_array_get(keys, before)));
        json_array_remove(keys, before);
      }
      return false;
    }
    json_array_append_new(keys, json_string(key));
  }
  return true;
}

void common_delete_stored(const json_t *keys) {
  size_t i;
  const json_t *k;
  json_array_foreach(keys, i, k) storage_delete(json_string_value(k));
}

static void add_key(json_t *keys, const char *key, size_t n) {
  char buf[STORAGE_KEY_LEN + 1];
  if (n >= sizeof buf) return;
  memcpy(buf, key, n);
  buf[n] = 0;
  if (storage_key_valid(buf)) json_array_append_new(keys, json_string(buf));
}

void common_cell_keys(json_t *keys, const char *cell) {
  if (!cell || !*cell) return;
  if (str_starts_with(cell, "[IMAGE]")) {
    const char *u = cell + 7, *files = strstr(u, "/files/");
    if (files) u = files + 7;
    return add_key(keys, u, strcspn(u, "?#"));
  }
  if (cell[0] != '[') return add_key(keys, cell, strlen(cell));
  json_t *list = jx_parse_or(cell, json_array());
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) if (json_is_string(v)) add_key(keys, json_string_value(v), json_string_length(v));
  json_decref(list);
}

static void put_escaped(FILE *f, const char *s) {
  for (; s && *s; s++) {
    switch (*s) {
    case '&': fputs("&amp;", f); break;
    case '<': fputs("&lt;", f); break;
    case '>': fputs("&gt;", f); break;
    case '"': fputs("&quot;", f); break;
    case '\'': fputs("&#39;", f); break;
    default: fputc(*s, f);
    }
  }
}

err_t common_reply_html(hs_req *req, const char *fmt, const char *const *values) {
  char *html = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&html, &len);
  if (!f) return ERR_INTERNAL;
  for (; *fmt; fmt++) {
    if (fmt[0] == '%' && fmt[1] == 's')
      put_escaped(f, *values++), fmt++;
    else
      fputc(*fmt, f);
  }
  fclose(f);
  return hs_reply_file(req, -1, html, len, "text/html; charset=utf-8");
}

/* The pages' one style sheet: inline (no remote asset), readable on a phone. */
#define PAGE_STYLE                                                                                                     \
  "<style>body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,Arial,sans-serif;max-width:34rem;"                \
  "margin:2rem auto;padding:0 1rem;line-height:1.5;color:#18181b}label{display:block;font-weight:600;"                 \
  "margin:1rem 0 .25rem}input{font:inherit;padding:.5rem;width:100%%;box-sizing:border-box;border:1px solid #71717a;"  \
  "border-radius:4px}button{font:inherit;margin-top:1rem;padding:.6rem 1.2rem;background:#1d4ed8;color:#fff;"          \
  "border:0;border-radius:6px;cursor:pointer}.problem{color:#b91c1c;font-weight:600}small{color:#52525b}</style>"

err_t common_reply_page(hs_req *req, const char *title, const char *body, const char *const *values) {
  err_t e = common_reply_html(
      req,
      arena_printf(
          &req->arena,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>%s</title>" PAGE_STYLE
          "</head><body><main>\n<h1>%s</h1>\n%s</main></body></html>\n",
          title, title, body),
      values);
  req->res_cache_control = "no-store"; /* a link's page shows the link's state now, never a copy */
  return e;
}

err_t common_reply_page_as(hs_req *req, int status, const char *title, const char *body, const char *const *values) {
  err_t e = common_reply_page(req, title, body, values);
  if (e == ERR_OK) req->status = status;
  return e;
}

err_t common_reply_impersonation(hs_req *req, const impersonated *who, const char *elevation_id, int64_t ttl) {
  char *token = token_issue(who->id, who->role, false, elevation_id, who->gen, ttl);
  if (!token) return ERR_INTERNAL;
  err_t e = hs_ok_pack(req, "{s:s,s:{s:s,s:s,s:s,s:s}}", "token", token, "identity", "id", who->id, "name", who->name,
                       "email", who->email, "role", who->role);
  free(token);
  return e;
}
