/* The calls a handler makes (http/http.h): reading its request, and deciding its answer. They
 * only fill the request's fields in its arena; the pipeline (http/pipeline.c) turns them into
 * the answer, and one function there writes every error body (http/answer.c). */
#include "core/errors.h"
#include "http/http.h"
#include "http/pipeline.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *hs_header(const hs_req *req, const char *name) {
  return req->conn_ops ? req->conn_ops->header(req->conn, name) : NULL;
}

const char *hs_param(const hs_req *req, const char *name) {
  for (int i = 0; i < req->nparams; i++)
    if (!strcmp(req->param_names[i], name)) return req->param_values[i];
  return NULL;
}

err_t hs_reply(hs_req *req, int status, json_t *body) {
  req->status = status;
  req->res_json = NULL;
  req->res_body = arena_json(&req->arena, body);
  return ERR_OK;
}

jw *hs_jw(hs_req *req, size_t hint) {
  jw *w = arena_alloc(&req->arena, sizeof *w);
  jw_init(w, &req->arena, hint);
  return w;
}

err_t hs_reply_jw(hs_req *req, int status, const jw *w) {
  req->status = status;
  req->res_body = NULL;
  req->res_json = jw_text(w), req->res_json_len = jw_len(w);
  return ERR_OK;
}

err_t hs_ok_jw(hs_req *req, const jw *w) {
  return hs_reply_jw(req, req->route && req->route->ok ? req->route->ok : 200, w);
}

err_t hs_ok_pack(hs_req *req, const char *fmt, ...) {
  jw *w = hs_jw(req, 64);
  va_list ap;
  va_start(ap, fmt);
  jw_packv(w, fmt, ap);
  va_end(ap);
  return hs_ok_jw(req, w);
}

err_t hs_reply_file(hs_req *req, int fd, char *data, size_t size, const char *content_type) {
  req->status = 200;
  req->res_fd = fd, req->res_data = data, req->res_size = size;
  req->res_content_type = content_type;
  return ERR_OK;
}

bool hs_etag_matches(const char *header, const char *etag) {
  if (!header || !etag) return false;
  size_t n = strlen(etag);
  for (const char *p = header; *p;) {
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    if (*p == '*') return true;
    if (!strncmp(p, "W/", 2)) p += 2;
    if (*p != '"') { /* not an entity tag: skip to the next item */
      while (*p && *p != ',') p++;
      continue;
    }
    const char *end = strchr(p + 1, '"');
    if (!end) return false;
    if ((size_t)(end + 1 - p) == n && !memcmp(p, etag, n)) return true;
    p = end + 1;
  }
  return false;
}

err_t hs_reply_file_cached(hs_req *req, int fd, char *data, size_t size, const char *content_type, const char *etag,
                           const char *cache_control) {
  req->res_etag = etag, req->res_cache_control = cache_control;
  if (!hs_etag_matches(hs_header(req, "If-None-Match"), etag)) return hs_reply_file(req, fd, data, size, content_type);
  if (fd >= 0) close(fd);
  free(data);
  hs_reply_file(req, -1, NULL, 0, content_type);
  req->status = 304;
  return ERR_OK;
}

err_t hs_ok(hs_req *req, json_t *body) {
  return hs_reply(req, req->route && req->route->ok ? req->route->ok : 200, body);
}

err_t hs_fail_code(hs_req *req, err_t err, const char *code, const char *message) {
  req->err = err;
  req->err_code = code;
  req->err_field = NULL;
  req->err_message = message ? arena_strdup(&req->arena, message) : NULL;
  return err;
}

err_t hs_fail_field(hs_req *req, const char *field, const char *message) {
  hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_VALIDATION, message);
  req->err_field = arena_strdup(&req->arena, field);
  return ERR_BAD_REQUEST;
}

err_t hs_fail_invalid(hs_req *req, const char *message) {
  const char *colon = strstr(message, ": ");
  hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_VALIDATION, message);
  if (colon) req->err_field = arena_strndup(&req->arena, message, (size_t)(colon - message));
  return ERR_BAD_REQUEST;
}

err_t hs_fail(hs_req *req, err_t err, const char *message) { return hs_fail_code(req, err, NULL, message); }

err_t hs_not_found(hs_req *req, const char *what) {
  return hs_fail(req, ERR_NOT_FOUND, arena_printf(&req->arena, "%s not found", what));
}

err_t hs_found_or_fail(hs_req *req, err_t e, const char *what) {
  return e == ERR_NOT_FOUND ? hs_not_found(req, what) : e;
}

int hs_status(const hs_req *req) { return req->err != ERR_OK ? err_status(req->err) : req->status; }

const char *hs_body_str(const hs_req *req, const char *field) {
  return json_string_value(json_object_get(req->body, field));
}

const char *hs_query_str(const hs_req *req, const char *field) {
  return json_string_value(json_object_get(req->query, field));
}

bool hs_body_has(const hs_req *req, const char *field) { return json_object_get(req->body, field) != NULL; }

hs_upload **hs_files(hs_req *req, const char *field, int *count) {
  hs_upload **out = arena_alloc(&req->arena, sizeof *out * (size_t)(req->nuploads + 1));
  *count = 0;
  for (int i = 0; i < req->nuploads; i++)
    if (!strcmp(req->uploads[i].field, field)) out[(*count)++] = &req->uploads[i];
  return out;
}
