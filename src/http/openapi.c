/* Generation walks the rows in table order and builds one operation per row. Schemas for
 * request input are derived field by field from hs_field (the JSON Schema keywords that
 * express the same bounds: lengths in characters, ranges, enums, patterns); a field that is
 * optional also admits null, since null counts as absent. Error answers are shared
 * components (#/components/responses/<status>) with the one error body shape. */
#include "http/openapi.h"
#include "core/util.h"
#include "ext/filetype.h"
#include "http/idempotency.h"
#include "http/router.h"
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef MARKETPLACE_VERSION
#define MARKETPLACE_VERSION "0.1.0"
#endif

/* build/gen/schemas.c (scripts/embed_schemas.sh): the text of every *.schema.json file */
typedef struct embedded_schema {
  const char *path, *text;
} embedded_schema;
extern const embedded_schema EMBEDDED_SCHEMAS[];
extern const int EMBEDDED_SCHEMA_COUNT;

static const struct {
  int status;
  const char *description;
} ERRORS[] = {
    {400, "The input is invalid: `<field>: <message>` for the first field that fails, in the documented order "
          "(`code` validation_failed, with `field`), or the record's state does not allow this (`invalid_state`)"},
    {401, "Missing, expired or tampered token (`Unauthorized`, with `WWW-Authenticate: Bearer`), or invalid "
          "credentials (`invalid_credentials`)"},
    {402, "The card was declined (the processor's message)"},
    {403, "The token's role may not use this route (`Forbidden`), or the caller may not act on this record"},
    {404, "No such record, or not one the caller may see"},
    {409, "The record's state does not allow this, or a conflicting request (also: an Idempotency-Key whose "
          "first request still runs, `idempotency_key_in_use` with Retry-After)"},
    {413, "The body is larger than the route allows"},
    {415, "The route takes a JSON body, and a multipart body came"},
    {422, "The request cannot be processed as sent (also: an Idempotency-Key reused with another request, "
          "`idempotency_key_reused`)"},
    {429, "Too many requests: wait Retry-After seconds"},
    {431, "The request's header fields are too large (any route)"},
    {500, "Internal server error: `{ error, requestId }`, nothing internal"},
    {503, "Temporarily unavailable (busy, or a service it depends on is unreachable): retry after Retry-After"},
    {504, "An outside service did not answer in time"},
    {507, "Storage is full"},
};

/* ---- input schemas from validation rows ---- */

static json_t *object_schema(const hs_schema *s, bool nullable_optionals);

/* Lets a schema also be null. */
static void allow_null(json_t *s) {
  json_t *type = json_object_get(s, "type");
  if (json_is_string(type)) json_object_set_new(s, "type", json_pack("[s,s]", json_string_value(type), "null"));
  json_t *choices = json_object_get(s, "enum");
  if (choices) json_array_append_new(choices, json_null());
  json_t *any = json_object_get(s, "anyOf");
  if (any) json_array_append_new(any, json_pack("{s:s}", "type", "null"));
}

static void bound(json_t *s, const char *key, size_t v) {
  if (v) json_object_set_new(s, key, json_integer((json_int_t)v));
}

static json_t *field_schema(const hs_field *f, bool nullable_optionals) {
  json_t *s = json_object();
  switch (f->kind) {
  case F_STRING:
    json_object_set_new(s, "type", json_string("string"));
    bound(s, "minLength", f->min_len);
    bound(s, "maxLength", f->max_len);
    if (f->max_bytes) json_object_set_new(s, "description", json_sprintf("at most %zu bytes of UTF-8", f->max_bytes));
    break;
  case F_EMAIL:
    json_object_set_new(s, "type", json_string("string"));
    json_object_set_new(s, "format", json_string("email"));
    json_object_set_new(s, "maxLength", json_integer(254));
    json_object_set_new(s, "description", json_string("trimmed and lowercased"));
    break;
  case F_ENUM: {
    json_t *choices = json_array();
    for (const char *const *c = f->choices; *c; c++) json_array_append_new(choices, json_string(*c));
    json_object_set_new(s, "type", json_string("string"));
    json_object_set_new(s, "enum", choices);
    break;
  }
  case F_ZIP:
    json_object_set_new(s, "type", json_string("string"));
    json_object_set_new(s, "pattern", json_string("^[0-9]{5}$"));
    break;
  case F_DATETIME:
    json_object_set_new(s, "type", json_string("string"));
    json_object_set_new(s, "format", json_string("date-time"));
    json_object_set_new(s, "description", json_string("ISO 8601 date-time, or a date (YYYY-MM-DD, midnight UTC)"));
    break;
  case F_TIME:
    json_object_set_new(s, "type", json_string("string"));
    json_object_set_new(s, "pattern", json_string("^([01][0-9]|2[0-3]):[0-5][0-9]$"));
    break;
  case F_BOOL: json_object_set_new(s, "type", json_string("boolean")); break;
  case F_INT:
  case F_NUMBER:
    json_object_set_new(s, "type", json_string(f->kind == F_INT ? "integer" : "number"));
    if (f->ranged) {
      json_object_set_new(s, "minimum", json_real(f->lo));
      json_object_set_new(s, "maximum", json_real(f->hi));
    }
    break;
  case F_OBJECT:
    json_decref(s);
    s = f->object ? object_schema(f->object, nullable_optionals) : json_pack("{s:s}", "type", "object");
    break;
  case F_ARRAY:
    json_object_set_new(s, "type", json_string("array"));
    if (f->item) json_object_set_new(s, "items", field_schema(f->item, false));
    bound(s, "minItems", f->min_len);
    bound(s, "maxItems", f->max_len);
    break;
  }
  if (f->flags & F_CSV) { /* ?status=A,B: an array of the kind, written comma-separated */
    s = json_pack("{s:s,s:o}", "type", "array", "items", s);
    if (f->required_unless || (f->flags & (F_NULLABLE | F_ONE_OR_MANY))) die("F_CSV field %s: only plain", f->name);
    return s;
  }
  if (f->flags & F_ONE_OR_MANY) {
    json_t *item = f->item ? field_schema(f->item, false) : json_deep_copy(s);
    json_t *many = json_pack("{s:s,s:O}", "type", "array", "items", item);
    bound(many, "minItems", f->min_len);
    bound(many, "maxItems", f->max_len);
    json_decref(s);
    s = json_pack("{s:[o,o],s:s}", "anyOf", item, many, "description",
                  "one value or an array of them (answered as an array without duplicates)");
  }
  if (f->required_unless)
    json_object_set_new(s, "description", json_sprintf("required unless %s is true", f->required_unless));
  if ((f->flags & F_NULLABLE) || (nullable_optionals && !(f->flags & F_REQUIRED))) allow_null(s);
  return s;
}

static json_t *object_schema(const hs_schema *s, bool nullable_optionals) {
  json_t *props = json_object(), *required = json_array();
  for (const hs_field *f = s->fields; f->name; f++) {
    json_object_set_new(props, f->name, field_schema(f, nullable_optionals));
    if (f->flags & F_REQUIRED) json_array_append_new(required, json_string(f->name));
  }
  json_t *o = json_pack("{s:s,s:o}", "type", "object", "properties", props);
  if (json_array_size(required))
    json_object_set_new(o, "required", required);
  else
    json_decref(required);
  return o;
}

/* ---- operations ---- */

static json_t *mime_list(unsigned types) {
  static const struct {
    unsigned bit;
    const char *mime;
  } kinds[] = {{FT_PNG, "image/png"}, {FT_JPEG, "image/jpeg"}, {FT_WEBP, "image/webp"}, {FT_PDF, "application/pdf"}};
  char buf[128] = "";
  for (size_t i = 0; i < ARRAY_LEN(kinds); i++)
    if (types & kinds[i].bit)
      snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", *buf ? ", " : "", kinds[i].mime);
  return json_string(buf);
}

static json_t *upload_body(const hs_upload_spec *u) {
  json_t *props = json_object(), *encoding = json_object(), *required = json_array();
  int rules = 0;
  for (const hs_file_rule *r = u->files; r->field; r++, rules++) {
    json_t *file = json_pack("{s:s,s:s}", "type", "string", "format", "binary");
    json_t *p =
        r->max_files == 1 ? file : json_pack("{s:s,s:o,s:i}", "type", "array", "items", file, "maxItems", r->max_files);
    json_object_set_new(p, "description",
                        json_sprintf("%s; at most %d file%s of %zu MB each", filetype_describe(r->types), r->max_files,
                                     r->max_files == 1 ? "" : "s", r->max_bytes / (1024 * 1024)));
    json_object_set_new(p, "x-max-bytes", json_integer((json_int_t)r->max_bytes));
    json_object_set_new(props, r->field, p);
    json_object_set_new(encoding, r->field, json_pack("{s:o}", "contentType", mime_list(r->types)));
  }
  if (u->fields) {
    json_t *text = object_schema(u->fields, false);
    json_object_update(props, json_object_get(text, "properties"));
    json_t *req = json_object_get(text, "required");
    if (req) json_array_extend(required, req);
    json_decref(text);
  }
  if (u->min_files > 0 && rules == 1) json_array_append_new(required, json_string(u->files[0].field));
  json_t *schema = json_pack("{s:s,s:o}", "type", "object", "properties", props);
  if (json_array_size(required))
    json_object_set_new(schema, "required", required);
  else
    json_decref(required);
  char desc[300];
  snprintf(desc, sizeof desc, "multipart/form-data; the type of each file is read from its bytes.%s%s",
           u->min_files > 0 ? " Without a file: 400 " : "",
           u->min_files > 0 ? (u->none_message ? u->none_message : "No file uploaded") : "");
  return json_pack("{s:b,s:s,s:{s:{s:o,s:o}}}", "required", 1, "description", desc, "content", "multipart/form-data",
                   "schema", schema, "encoding", encoding);
}

static bool component_exists(json_t *schemas, const char *name) { return json_object_get(schemas, name) != NULL; }

/* The success answer's content for a row's `response`. */
static json_t *success_content(const hs_route *r, json_t *schemas) {
  if (!r->response) return NULL;
  if (strchr(r->response, '/')) {
    json_t *schema = json_pack("{s:s}", "type", "string");
    if (r->stream_schema) { /* a stream: each of its events, by kind, as the schema (so /docs and the
                               generated types show every kind and its data, not "string") */
      if (!component_exists(schemas, r->stream_schema))
        die("route %s %s: no schema component named %s", hs_method_name(r->method), r->path, r->stream_schema);
      json_decref(schema);
      schema = json_pack("{s:s+,s:s}", "$ref", "#/components/schemas/", r->stream_schema, "description",
                         "The answer is a sequence of these events, each written as Server-Sent Events' lines "
                         "(`id:`, `event:`, `data:` with the JSON of `data`), not one JSON value");
    }
    json_t *media = json_pack("{s:o}", "schema", schema);
    return json_pack("{s:o}", r->response, media);
  }
  char name[128];
  snprintf(name, sizeof name, "%s", r->response);
  size_t len = strlen(name);
  bool nullable = len && name[len - 1] == '?';
  if (nullable) name[--len] = 0;
  bool array = len > 2 && !strcmp(name + len - 2, "[]");
  if (array) name[len -= 2] = 0;
  if (!component_exists(schemas, name))
    die("route %s %s: no schema component named %s", hs_method_name(r->method), r->path, name);
  json_t *s = json_pack("{s:s+}", "$ref", "#/components/schemas/", name);
  if (array) s = json_pack("{s:s,s:o}", "type", "array", "items", s);
  if (nullable) s = json_pack("{s:[o,{s:s}]}", "oneOf", s, "type", "null");
  return json_pack("{s:{s:o}}", "application/json", "schema", s);
}

static bool takes_body(const hs_route *r) {
  return r->method == HS_POST || r->method == HS_PUT || r->method == HS_PATCH || r->method == HS_DELETE;
}

/* A paged list: its query takes a cursor (http/paging.h, HS_PAGE_FIELDS). */
static bool pages(const hs_route *r) {
  for (const hs_field *f = r->query ? r->query->fields : NULL; f && f->name; f++)
    if (!strcmp(f->name, "cursor")) return true;
  return false;
}

static void add_error(json_t *responses, int status) {
  char code[8];
  snprintf(code, sizeof code, "%d", status);
  if (!json_object_get(responses, code))
    json_object_set_new(responses, code, json_pack("{s:s+}", "$ref", "#/components/responses/", code));
}

static json_t *responses_for(const hs_route *r, json_t *schemas) {
  json_t *res = json_object();
  int ok = r->ok ? r->ok : 200;
  char code[8];
  snprintf(code, sizeof code, "%d", ok);
  json_t *success = json_pack("{s:s}", "description", ok == 201 ? "Created" : ok == 204 ? "No Content" : "OK");
  json_t *content = success_content(r, schemas);
  if (content) json_object_set_new(success, "content", content);
  if (hs_idem_applies(r))
    json_object_set_new(
        success, "headers",
        json_pack("{s:{s:s+}}", "Idempotent-Replayed", "$ref", "#/components/headers/", "IdempotentReplayed"));
  if (pages(r))
    json_object_set_new(success, "headers", json_pack("{s:{s:s}}", "Link", "$ref", "#/components/headers/NextPage"));
  if (r->flags & ROUTE_ETAG) { /* validators (http.h: hs_reply_file_cached) */
    json_t *headers =
        json_pack("{s:{s:s,s:{s:s}},s:{s:s,s:{s:s}}}", "ETag", "description",
                  "a strong entity tag of the file: send it back in If-None-Match to get 304 when it has not changed",
                  "schema", "type", "string", "Cache-Control", "description",
                  "`private, max-age=<seconds>`: cacheable until the signed link expires, never longer", "schema",
                  "type", "string");
    json_object_set_new(success, "headers", json_deep_copy(headers));
    json_object_set_new(res, "304",
                        json_pack("{s:s,s:o}", "description",
                                  "Not Modified: If-None-Match names the file's ETag (or is *); no body", "headers",
                                  headers));
  }
  json_object_set_new(res, code, success);
  if (r->body || r->query || r->upload || takes_body(r)) add_error(res, 400);
  if (r->roles) add_error(res, 401);
  if (r->roles && r->roles != ROLE_ANY) add_error(res, 403);
  if (r->flags & ROUTE_DEV_ONLY) add_error(res, 404);
  if (hs_idem_applies(r)) add_error(res, 409), add_error(res, 422);
  if (takes_body(r) || r->upload) add_error(res, 413);
  if (takes_body(r) && !r->upload && !(r->flags & ROUTE_RAW_BODY)) add_error(res, 415);
  if (r->limit) add_error(res, 429);
  add_error(res, 431);
  add_error(res, 500);
  if (!(r->flags & ROUTE_INLINE)) add_error(res, 503);
  if (r->upload) add_error(res, 507);
  for (const err_t *e = r->errors; e && *e != ERR_OK; e++) {
    if (!r->error_schema) {
      add_error(res, err_status(*e));
      continue;
    }
    if (!component_exists(schemas, r->error_schema))
      die("route %s %s: no schema component named %s", hs_method_name(r->method), r->path, r->error_schema);
    snprintf(code, sizeof code, "%d", err_status(*e));
    json_object_set_new(res, code,
                        json_pack("{s:s,s:{s:{s:{s:s+}}}}", "description", r->error_schema, "content",
                                  "application/json", "schema", "$ref", "#/components/schemas/", r->error_schema));
  }
  /* statuses in ascending order, as readers expect */
  json_t *sorted = json_object();
  for (int s = 100; s < 600; s++) {
    snprintf(code, sizeof code, "%d", s);
    json_t *v = json_object_get(res, code);
    if (v) json_object_set(sorted, code, v);
  }
  json_decref(res);
  return sorted;
}

/* "/jobs/:id/status" -> "/jobs/{id}/status", with the parameters' objects (a last `*rest`
 * is a parameter too: the rest of the path). */
static char *openapi_path(const char *pattern, json_t *params) {
  size_t cap = strlen(pattern) * 2 + 2;
  char *out = xmalloc(cap), *o = out;
  for (const char *p = pattern; *p;) {
    if ((*p == ':' || *p == '*') && p > pattern && p[-1] == '/') {
      size_t n = strcspn(p + 1, "/");
      o += sprintf(o, "{%.*s}", (int)n, p + 1);
      json_t *name = json_stringn(p + 1, n);
      json_t *param =
          json_pack("{s:o,s:s,s:b,s:{s:s}}", "name", name, "in", "path", "required", 1, "schema", "type", "string");
      if (*p == '*') { /* the rest of the path: it may hold slashes */
        json_object_set_new(param, "description", json_string("the rest of the path: one segment or more"));
        json_object_set_new(param, "x-rest-of-path", json_true());
      }
      json_array_append_new(params, param);
      p += n + 1;
    } else {
      *o++ = *p++;
    }
  }
  *o = 0;
  return out;
}

/* getJobsByIdStatus: the method and the path's words, parameters as By<Name>. */
static json_t *operation_id(const hs_route *r) {
  char buf[512];
  const char *m = hs_method_name(r->method);
  size_t n = 0;
  for (const char *c = m; *c && n < sizeof buf - 1; c++) buf[n++] = (char)(*c | 0x20);
  bool upper = true;
  for (const char *p = r->path; *p && n < sizeof buf - 4; p++) {
    if (*p == '/' || *p == '-' || *p == '_' || *p == '.') {
      upper = true;
      continue;
    }
    if (*p == ':' || *p == '*') {
      memcpy(buf + n, "By", 2), n += 2;
      upper = true;
      continue;
    }
    buf[n++] = upper && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
    upper = false;
  }
  buf[n] = 0;
  return json_string(buf);
}

static json_t *operation(const hs_route *r, json_t *schemas) {
  json_t *op = json_object(), *params = json_array();
  char *path = openapi_path(r->path, params);
  free(path);
  const char *tag = r->path + 1;
  json_object_set_new(op, "operationId", operation_id(r));
  json_object_set_new(op, "summary", json_string(r->summary ? r->summary : ""));
  json_object_set_new(op, "tags", json_pack("[s%]", tag, strcspn(tag, "/")));
  if (r->roles) {
    json_t *roles = json_array();
    for (unsigned bit = 1; bit && bit <= ROLE_ANY; bit <<= 1)
      if (r->roles & bit && hs_role_name(bit)) json_array_append_new(roles, json_string(hs_role_name(bit)));
    json_t *security = json_pack("[{s:[]}]", "bearerAuth");
    if (r->flags & ROUTE_TICKET) json_array_append_new(security, json_pack("{s:[]}", "eventTicket"));
    if (r->flags & ROUTE_COOKIE) json_array_append_new(security, json_pack("{s:[]}", "eventSession"));
    json_object_set_new(op, "security", security);
    json_object_set_new(op, "x-roles", roles);
  } else {
    json_object_set_new(op, "security", json_array());
  }
  if (r->query)
    for (const hs_field *f = r->query->fields; f->name; f++) {
      json_t *p = json_pack("{s:s,s:s,s:b,s:o}", "name", f->name, "in", "query", "required",
                            (f->flags & F_REQUIRED) != 0, "schema", field_schema(f, false));
      if (f->flags & F_CSV) json_object_update_new(p, json_pack("{s:s,s:b}", "style", "form", "explode", 0));
      if (f->message)
        json_object_set_new(p, "description", json_sprintf("otherwise 400 `%s: %s`", f->name, f->message));
      json_array_append_new(params, p);
    }
  if (hs_idem_applies(r))
    json_array_append_new(params, json_pack("{s:s}", "$ref", "#/components/parameters/IdempotencyKey"));
  if (json_array_size(params))
    json_object_set_new(op, "parameters", params);
  else
    json_decref(params);
  if (r->upload) {
    json_object_set_new(op, "requestBody", upload_body(r->upload));
  } else if (r->flags & ROUTE_RAW_BODY && r->body) { /* a form the handler reads itself: its fields */
    json_object_set_new(op, "requestBody",
                        json_pack("{s:b,s:{s:{s:o}}}", "required", 1, "content", "application/x-www-form-urlencoded",
                                  "schema", object_schema(r->body, false)));
  } else if (r->flags & ROUTE_RAW_BODY) {
    json_object_set_new(op, "requestBody",
                        json_pack("{s:b,s:s,s:{s:{s:{s:s}}}}", "required", 1, "description",
                                  "the raw body, verified against its signature before it is parsed", "content",
                                  "application/json", "schema", "type", "object"));
  } else if (r->body) {
    /* a missing body counts as {}: the body is required exactly when one of its fields is */
    bool required = false;
    for (const hs_field *f = r->body->fields; f->name; f++) required |= (f->flags & F_REQUIRED) != 0;
    json_object_set_new(op, "requestBody",
                        json_pack("{s:b,s:{s:{s:o}}}", "required", required, "content", "application/json", "schema",
                                  object_schema(r->body, true)));
  }
  json_object_set_new(op, "responses", responses_for(r, schemas));
  size_t max = r->max_body ? r->max_body : 0;
  if (max) json_object_set_new(op, "x-max-body-bytes", json_integer((json_int_t)max));
  if (r->limit) {
    json_t *limit = json_pack("{s:s,s:i,s:I}", "name", r->limit->name, "max", r->limit->max, "windowSeconds",
                              (json_int_t)(r->limit->window_ms / 1000));
    if (r->limit->per_account) json_object_set_new(limit, "per", json_string("account"));
    json_object_set_new(op, "x-rate-limit", limit);
  }
  if (r->flags & ROUTE_DEV_ONLY) json_object_set_new(op, "x-dev-only", json_true());
  if (r->flags & ROUTE_CORS_ANY) json_object_set_new(op, "x-cors-any-origin", json_true());
  return op;
}

#define MAX_EVENTS 32
static const hs_stream_event *events[MAX_EVENTS]; /* hs_openapi_add_event, in order */
static size_t nevents;

void hs_openapi_add_event(const hs_stream_event *ev) {
  if (nevents == MAX_EVENTS) die("more than %d live-update event kinds", MAX_EVENTS);
  events[nevents++] = ev;
}

/* "quote.created" -> "QuoteCreatedEvent" (each part capitalized, '.' and '_' dropped). */
static void event_component(const char *kind, char out[128]) {
  size_t n = 0;
  bool up = true;
  for (const char *k = kind; *k && n < 120; k++) {
    if (*k == '.' || *k == '_') {
      up = true;
      continue;
    }
    out[n++] = up ? (char)toupper((unsigned char)*k) : *k;
    up = false;
  }
  snprintf(out + n, 128 - n, "Event");
}

/* Each event kind's component, and its place in the stream's: the stream_schema component's
 * oneOf (its control events) gets the kinds in front, in the order they were added. */
static void events_into(json_t *schemas, const char *stream) {
  json_t *one_of = json_object_get(json_object_get(schemas, stream), "oneOf");
  if (!json_is_array(one_of)) die("stream component %s: no oneOf to list the event kinds in", stream);
  for (size_t i = 0; i < nevents; i++) {
    const hs_stream_event *ev = events[i];
    char name[128];
    event_component(ev->kind, name);
    if (component_exists(schemas, name)) die("event %s: component %s is defined twice", ev->kind, name);
    if (!component_exists(schemas, ev->data)) die("event %s: no schema component named %s", ev->kind, ev->data);
    json_t *props = json_pack("{s:{s:s,s:s},s:{s:s,s:s},s:{s:s+}}", "id", "type", "string", "description",
                              "the event's position: what a reconnect sends as Last-Event-ID", "event", "type",
                              "string", "const", ev->kind, "data", "$ref", "#/components/schemas/", ev->data);
    json_t *required =
        ev->id_optional ? json_pack("[s,s]", "event", "data") : json_pack("[s,s,s]", "id", "event", "data");
    json_object_set_new(schemas, name,
                        json_pack("{s:s,s:s,s:o,s:o,s:b}", "type", "object", "description", ev->description,
                                  "properties", props, "required", required, "additionalProperties", 0));
    json_array_insert_new(one_of, i, json_pack("{s:s+}", "$ref", "#/components/schemas/", name));
  }
}

static json_t *load_components(void) {
  json_t *schemas = json_object();
  for (int i = 0; i < EMBEDDED_SCHEMA_COUNT; i++) {
    json_error_t jerr;
    json_t *file = json_loads(EMBEDDED_SCHEMAS[i].text, 0, &jerr);
    if (!json_is_object(file)) die("%s: %s (line %d)", EMBEDDED_SCHEMAS[i].path, jerr.text, jerr.line);
    const char *name;
    json_t *schema;
    json_object_foreach(file, name, schema) {
      if (json_object_get(schemas, name)) die("%s: schema %s is defined twice", EMBEDDED_SCHEMAS[i].path, name);
      json_object_set(schemas, name, schema);
    }
    json_decref(file);
  }
  return schemas;
}

/* The error body's `code`: the one list of codes (core/errors.h) as its enum. */
static void error_codes_into(json_t *schemas) {
  json_t *code = json_object_get(json_object_get(json_object_get(schemas, "Error"), "properties"), "code");
  if (!code) die("http.schema.json: the Error component has no code property");
  json_t *choices = json_array();
  for (const char *const *c = ERR_CODES; *c; c++) json_array_append_new(choices, json_string(*c));
  json_object_set_new(code, "enum", choices);
  json_object_set_new(code, "description",
                      json_string("what went wrong, for programs: the error's kind (not_found, conflict, ...) or a "
                                  "more precise name (validation_failed, invalid_state, ...)"));
}

static json_t *shared_components(json_t *schemas) {
  error_codes_into(schemas);
  json_t *responses = json_object();
  for (size_t i = 0; i < ARRAY_LEN(ERRORS); i++) {
    char code[8];
    snprintf(code, sizeof code, "%d", ERRORS[i].status);
    json_t *resp = json_pack("{s:s,s:{s:{s:{s:s}}}}", "description", ERRORS[i].description, "content",
                             "application/json", "schema", "$ref", "#/components/schemas/Error");
    int status = ERRORS[i].status;
    if (status == 409 || status == 429 || status == 503)
      json_object_set_new(resp, "headers",
                          json_pack("{s:{s:s,s:{s:s}}}", "Retry-After", "description",
                                    status == 409 ? "seconds to wait before trying again (an Idempotency-Key whose "
                                                    "first request still runs)"
                                                  : "seconds to wait before trying again",
                                    "schema", "type", "integer"));
    if (status == 401)
      json_object_set_new(resp, "headers",
                          json_pack("{s:{s:s,s:{s:s}}}", "WWW-Authenticate", "description",
                                    "on a missing token `Bearer`; on an expired, tampered or ended one "
                                    "`Bearer error=\"invalid_token\"` (RFC 6750)",
                                    "schema", "type", "string"));
    json_object_set_new(responses, code, resp);
  }
  json_t *key = json_pack(
      "{s:s,s:s,s:b,s:s,s:{s:s,s:i,s:i,s:s}}", "name", "Idempotency-Key", "in", "header", "required", 0, "description",
      "Makes a retry safe: a repeat with the same key, method, path and body within 24 hours gets the "
      "first answer again (with Idempotent-Replayed: true) and changes nothing. Keys are per account "
      "(per client address on open routes).",
      "schema", "type", "string", "minLength", 1, "maxLength", 255, "pattern", "^[\\x20-\\x7E]+$");
  json_t *replayed = json_pack("{s:s,s:{s:s,s:[s]}}", "description", "present on the replay of a kept answer", "schema",
                               "type", "string", "enum", "true");
  json_t *next = json_pack("{s:s,s:{s:s}}", "description",
                           "present when a paged request (`limit` or `cursor`) has a next page: `<URL>; rel=\"next\"` "
                           "(RFC 8288), the same request with the next page's cursor",
                           "schema", "type", "string");
  json_t *ticket = json_pack("{s:s,s:s,s:s,s:s}", "type", "apiKey", "in", "query", "name", "ticket", "description",
                             "A single-use ticket from POST /events/ticket, for clients that cannot send the "
                             "Authorization header (a browser's EventSource)");
  json_t *session =
      json_pack("{s:s,s:s,s:s,s:s}", "type", "apiKey", "in", "cookie", "name", "events_session", "description",
                "The HttpOnly cookie POST /events/session sets (Path=/events): what a browser's "
                "EventSource with withCredentials sends on every reconnect, valid as long as the token "
                "that asked for it; accepted from this service's own origin or one CORS_ORIGINS lists");
  return json_pack("{s:o,s:o,s:{s:o},s:{s:o,s:o},s:{s:{s:s,s:s,s:s},s:o,s:o}}", "schemas", schemas, "responses",
                   responses, "parameters", "IdempotencyKey", key, "headers", "IdempotentReplayed", replayed,
                   "NextPage", next, "securitySchemes", "bearerAuth", "type", "http", "scheme", "bearer",
                   "bearerFormat", "JWT", "eventTicket", ticket, "eventSession", session);
}

/* True when some operation answers the error status code. */
static bool status_used(json_t *paths, const char *code) {
  const char *path, *method;
  json_t *item, *op;
  json_object_foreach(paths, path, item)
      json_object_foreach(item, method, op) if (json_object_get(json_object_get(op, "responses"), code)) return true;
  return false;
}

#define SCHEMA_REF "#/components/schemas/"

/* Adds to names every component schema that node refers to, directly or through another. */
static void collect_schemas(json_t *node, json_t *schemas, json_t *names) {
  if (json_is_array(node)) {
    size_t i;
    json_t *item;
    json_array_foreach(node, i, item) collect_schemas(item, schemas, names);
  }
  if (!json_is_object(node)) return;
  const char *key, *ref = json_string_value(json_object_get(node, "$ref"));
  json_t *value;
  if (ref && !strncmp(ref, SCHEMA_REF, strlen(SCHEMA_REF)) && !json_object_get(names, ref + strlen(SCHEMA_REF))) {
    json_object_set_new(names, ref + strlen(SCHEMA_REF), json_true());
    collect_schemas(json_object_get(schemas, ref + strlen(SCHEMA_REF)), schemas, names);
  }
  json_object_foreach(node, key, value) collect_schemas(value, schemas, names);
}

/* Drops the component schemas no operation uses (those of routes this environment does not
 * serve: GODMODE's in production). */
static void keep_used_schemas(json_t *paths, json_t *components) {
  json_t *schemas = json_object_get(components, "schemas"), *used = json_object();
  collect_schemas(paths, schemas, used);
  const char *key;
  json_t *value;
  json_object_foreach(components, key, value) if (value != schemas) collect_schemas(value, schemas, used);
  void *iter = json_object_iter(schemas);
  while (iter) {
    const char *name = json_object_iter_key(iter);
    iter = json_object_iter_next(schemas, iter);
    if (!json_object_get(used, name)) json_object_del(schemas, name);
  }
  json_decref(used);
}

json_t *hs_openapi_document(const hs_route *rows, size_t n) {
  json_t *schemas = load_components(), *paths = json_object();
  json_t *streams = json_object(); /* each stream component gets the event kinds once */
  for (size_t i = 0; i < n; i++)
    if (rows[i].stream_schema && !json_object_get(streams, rows[i].stream_schema)) {
      events_into(schemas, rows[i].stream_schema);
      json_object_set_new(streams, rows[i].stream_schema, json_true());
    }
  json_decref(streams);
  for (size_t i = 0; i < n; i++) {
    const hs_route *r = &rows[i];
    if ((r->flags & ROUTE_TEST_ONLY) || !hs_route_available(r)) continue;
    json_t *ignored = json_array();
    char *path = openapi_path(r->path, ignored);
    json_decref(ignored);
    json_t *item = json_object_get(paths, path);
    if (!item) json_object_set_new(paths, path, item = json_object());
    char method[8];
    snprintf(method, sizeof method, "%s", hs_method_name(r->method));
    for (char *c = method; *c; c++) *c = (char)(*c | 0x20);
    json_object_set_new(item, method, operation(r, schemas));
    free(path);
  }
  json_t *components = shared_components(schemas), *responses = json_object_get(components, "responses");
  void *iter = json_object_iter(responses); /* keep the error answers some operation uses */
  while (iter) {
    const char *code = json_object_iter_key(iter);
    iter = json_object_iter_next(responses, iter);
    if (!status_used(paths, code)) json_object_del(responses, code);
  }
  keep_used_schemas(paths, components);
  return json_pack(
      "{s:s,s:{s:s,s:s,s:s,s:{s:s,s:s}},s:[{s:s,s:s}],s:o,s:o}", "openapi", "3.1.0", "info", "title",
      "Home-services marketplace API", "version", MARKETPLACE_VERSION, "description",
      "Customers post jobs, verified providers quote, the customer accepts one quote; the card is authorized on "
      "acceptance and captured on completion. Generated from the service's route table: every route, its roles "
      "(`x-roles`), input bounds, and every status it answers. Errors are `{ \"error\": \"...\", \"code\": \"...\" }` "
      "(the Error schema lists every code). Lists page with `limit` and `cursor` (the next page in the `Link` "
      "header). Start with docs/quickstart.md.",
      "license", "name", "Proprietary", "identifier", "LicenseRef-Proprietary", "servers", "url", "/", "description",
      "the server that serves this document", "paths", paths, "components", components);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char *text;

static void build_text(void) {
  size_t n;
  const hs_route *rows = hs_router_routes(&n);
  json_t *doc = hs_openapi_document(rows, n);
  text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
}

const char *hs_openapi_text(size_t *len) {
  pthread_once(&once, build_text);
  *len = strlen(text);
  return text;
}
