/* Parts from the multipart parser's callbacks (http/multipart.h). The parser calls once per
 * piece of a part's value with the piece's offset in the part, and exactly once at offset 0 for
 * every part (an empty value is that one call), whatever TCP made of the body: so a call at
 * offset 0 begins a part, and any other call continues the current one at the offset it has
 * reached.
 *
 * Limits hold as bytes arrive: a file's size (413), the number of files per field (400), at
 * most MAX_PARTS parts (empty ones too) and MAX_TEXT bytes of text field names and values (413),
 * so a form of empty fields is bounded. A file's temporary file is
 * created on its first byte; a named but empty file still makes an (empty) upload, which then fails the type check.
 * Only declared text fields are kept, one at a time in one capped buffer (core/buf.h, freed
 * with the request), and checked for UTF-8 once whole, since a character may straddle two pieces. */
#include "http/upload.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/faults.h"
#include "core/tmpdir.h"
#include "core/util.h"
#include "core/vec.h"
#include "ext/digest.h"
#include "ext/filetype.h"
#include "ext/imagemeta.h"
#include "ext/storage.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_TEXT (64 * 1024)
#define MAX_PARTS 512

struct hs_form {
  hs_req *req;
  const hs_upload_spec *spec;
  /* the part being received */
  bool in_part, is_file;
  uint64_t part_bytes;
  char name[128];           /* its name, cut (for messages and unknown fields only) */
  char filename[128];       /* file part: the client's file name, cut */
  const hs_file_rule *rule; /* file part: its field's rule (NULL: unexpected field) */
  bool named;               /* file part: has a file name ("" means no file chosen) */
  int fd;                   /* file part: its temporary file once data arrived, else -1 */
  const char *field;        /* text part: the declared field's name, or NULL (ignored) */
  struct buf text;          /* text part: its value so far (declared fields only) */
  /* the body so far */
  int parts;
  VEC(hs_upload) uploads; /* in the request's arena; req->uploads points at its items */
  size_t text_bytes;
  json_t *fields;
  err_t err;
  const char *msg;
};

size_t hs_form_body_limit(const hs_upload_spec *spec) {
  size_t total = 1024 * 1024;
  for (const hs_file_rule *r = spec->files; r->field; r++) total += (size_t)r->max_files * r->max_bytes;
  return total;
}

static void free_text(void *p) { buf_free(&((hs_form *)p)->text); }

static void close_fd(void *p) {
  hs_form *f = p;
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
}

hs_form *hs_form_new(hs_req *req) {
  hs_form *f = arena_alloc(&req->arena, sizeof *f);
  f->req = req;
  f->spec = req->route->upload;
  f->fd = -1;
  f->fields = arena_json(&req->arena, json_object());
  req->form_fields = arena_json(&req->arena, json_array());
  buf_init(&f->text, MAX_TEXT);
  arena_defer(&req->arena, free_text, f);
  arena_defer(&req->arena, close_fd, f);
  return f;
}

static void fail(hs_form *f, err_t e, const char *msg) {
  if (f->err != ERR_OK) return; /* the first problem is the one reported */
  f->err = e;
  f->msg = arena_strdup(&f->req->arena, msg);
}

void hs_form_malformed(hs_form *f) { fail(f, ERR_BAD_REQUEST, "body: malformed multipart/form-data"); }

static const hs_file_rule *file_rule(const hs_upload_spec *spec, const char *field) {
  for (const hs_file_rule *r = spec->files; r->field; r++)
    if (!strcmp(r->field, field)) return r;
  return NULL;
}

static const char *declared_field(const hs_upload_spec *spec, const char *key) {
  for (const hs_field *fl = spec->fields ? spec->fields->fields : NULL; fl && fl->name; fl++)
    if (!strcmp(fl->name, key)) return fl->name;
  return NULL;
}

static void unlink_path(void *p) { unlink(p); }

/* A file of the upload cannot be written (errno says why): 507 when the disk is full, 503
 * otherwise; the request's temporary files go with it. */
static void storage_failed(hs_form *f) {
  storage_failure_note(errno);
  err_t e = storage_failure();
  fail(f, e, e == ERR_INSUFFICIENT_STORAGE ? "Insufficient storage" : "File storage unavailable");
}

/* Creates the temporary file of the current file part, as a new upload. */
static void open_file(hs_form *f) {
  hs_req *req = f->req;
  char msg[200];
  if (!f->rule) {
    snprintf(msg, sizeof msg, "%s: unexpected file field", f->name);
    return fail(f, ERR_BAD_REQUEST, msg);
  }
  int count = 0;
  for (int i = 0; i < req->nuploads; i++) count += req->uploads[i].field == f->rule->field;
  if (count >= f->rule->max_files) {
    snprintf(msg, sizeof msg, "%s: at most %d file%s", f->rule->field, f->rule->max_files,
             f->rule->max_files == 1 ? "" : "s");
    return fail(f, ERR_BAD_REQUEST, msg);
  }
  char *path = arena_printf(&req->arena, "%s/upload-XXXXXX", tmpdir_path());
  f->fd = mkstemp(path);
  if (f->fd < 0) return storage_failed(f);
  arena_defer(&req->arena, unlink_path, path); /* gone with the request unless moved into storage */
  *vec_push(&req->arena, &f->uploads) =
      (hs_upload){.field = f->rule->field, .filename = arena_strdup(&req->arena, f->filename), .path = path};
  req->uploads = f->uploads.items, req->nuploads = (int)f->uploads.size;
}

static void write_file(hs_form *f, const char *data, size_t size) {
  if (f->fd < 0) open_file(f);
  if (f->fd < 0) return;
  hs_upload *u = &f->req->uploads[f->req->nuploads - 1];
  if (u->size + size > f->rule->max_bytes) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: file larger than %zu MB", f->rule->field, f->rule->max_bytes / (1024 * 1024));
    close_fd(f);
    return fail(f, ERR_TOO_LARGE, msg);
  }
  for (size_t done = 0; done < size;) {
    ssize_t w = write(f->fd, data + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      close_fd(f);
      return storage_failed(f);
    }
    done += (size_t)w;
  }
  u->size += size;
}

static bool count_text(hs_form *f, size_t n) {
  f->text_bytes += n;
  if (f->text_bytes <= MAX_TEXT) return true;
  fail(f, ERR_TOO_LARGE, "form fields too large");
  return false;
}

static void append_text(hs_form *f, const char *data, size_t size) {
  if (!count_text(f, size) || !f->field) return;
  buf_rc rc = buf_addn(&f->text, data, size); /* within MAX_TEXT: count_text refused more */
  if (rc == BUF_NOMEM) oom();
  if (rc != BUF_OK) fail(f, ERR_TOO_LARGE, "form fields too large");
}

static void end_part(hs_form *f) {
  if (!f->in_part) return;
  f->in_part = false;
  if (f->is_file) {
    if (f->fd < 0 && f->named && f->err == ERR_OK) open_file(f); /* a named, empty file */
    close_fd(f);
    return;
  }
  if (!f->field || f->err != ERR_OK) return;
  const char *text = buf_ptr(&f->text) ? buf_ptr(&f->text) : "";
  size_t len = buf_len(&f->text);
  json_t *v = memchr(text, 0, len) ? NULL : json_stringn(text, len);
  if (!v) {
    char msg[160];
    snprintf(msg, sizeof msg, "%s: must be valid UTF-8 text", f->field);
    return fail(f, ERR_BAD_REQUEST, msg);
  }
  json_object_set_new(f->fields, f->field, v);
}

static void begin_part(hs_form *f, const char *key, const char *filename) {
  end_part(f);
  f->in_part = true, f->part_bytes = 0;
  f->is_file = filename != NULL;
  snprintf(f->name, sizeof f->name, "%s", key);
  if (f->is_file) {
    f->rule = file_rule(f->spec, key);
    f->named = *filename != 0;
    snprintf(f->filename, sizeof f->filename, "%s", filename);
  } else if (count_text(f, strlen(key))) {
    f->field = declared_field(f->spec, key);
    buf_reset(&f->text);
    json_array_append_new(f->req->form_fields, json_stringn_nocheck(key, strlen(key)));
  }
}

void hs_form_data(hs_form *f, const char *key, const char *filename, const char *data, uint64_t off, size_t size) {
  if (!key || f->err != ERR_OK) return; /* keep reading, keep nothing */
  if (off == 0) {
    if (++f->parts > MAX_PARTS) return fail(f, ERR_TOO_LARGE, "form fields too large");
    begin_part(f, key, filename);
  } else if (!f->in_part || off != f->part_bytes) {
    return hs_form_malformed(f);
  }
  if (f->err != ERR_OK || size == 0) return;
  f->part_bytes += size;
  if (f->is_file)
    write_file(f, data, size);
  else
    append_text(f, data, size);
}

err_t hs_form_finish(hs_form *f) {
  hs_req *req = f->req;
  const hs_upload_spec *spec = f->spec;
  end_part(f);
  if (f->err == ERR_BAD_REQUEST) return hs_fail_invalid(req, f->msg); /* "<field>: ..." */
  if (f->err != ERR_OK) return hs_fail(req, f->err, f->msg);
  if (req->nuploads < spec->min_files) /* the field wanted: the route's one file field, else the body */
    return hs_fail_field(req, spec->files[1].field ? "body" : spec->files[0].field,
                         spec->none_message ? spec->none_message : "No file uploaded");
  bool keyed = hs_header(req, "Idempotency-Key") != NULL; /* its fingerprint holds the files' hashes */
  for (int i = 0; i < req->nuploads; i++) {
    hs_upload *u = &req->uploads[i];
    if (keyed && !sha256_file_hex(u->path, u->sha256)) return hs_fail(req, ERR_INTERNAL, NULL);
    const hs_file_rule *rule = file_rule(spec, u->field);
    filetype t = filetype_of(u->path);
    if (!(t.bit & rule->types))
      return hs_fail_invalid(req,
                             arena_printf(&req->arena, "%s: must be %s", u->field, filetype_describe(rule->types)));
    u->mime = t.mime, u->ext = t.ext;
    image_meta_rc rc = image_strip_metadata(u->path, u->mime);
    if (rc == IMAGE_META_UNREADABLE)
      return hs_fail_invalid(req, arena_printf(&req->arena, "%s: the image is damaged or incomplete", u->field));
    if (rc != IMAGE_META_OK) return hs_fail(req, ERR_INTERNAL, NULL);
  }
  fault_point("upload-received");
  if (!spec->fields) return ERR_OK;
  char err[256];
  req->body = arena_json(&req->arena, hs_validate(spec->fields, f->fields, true, err));
  return req->body ? ERR_OK : hs_fail_invalid(req, err);
}
