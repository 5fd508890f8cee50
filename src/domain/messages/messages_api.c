/* Handlers of the message threads: which thread a caller may use, listing, posting text and
 * photos, and the other party's notification. The SQL is in messages_store.c.
 *
 * A photo is stored first; its message keeps "[IMAGE]<storage key>", and every answer writes
 * "[IMAGE]<signed URL>" signed when it is read (one year, the same URL throughout its hour:
 * ext/storage.h), so a link never outlives its signature and a list refresh keeps the URLs an
 * image cache knows. A photo with variants (ext/storage.h) also has `variants`: its link to
 * them. */
#include "domain/messages/messages_api.h"
#include "core/ids.h"
#include "core/util.h"
#include "domain/jobs/jobs.h"
#include "domain/messages/messages.h"
#include "domain/messages/messages_store.h"
#include "domain/notifications/notifications.h"
#include "ext/storage.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

typedef struct thread {
  const char *job_id, *provider_id, *customer_id, *status;
  const char *sender_name, *counterpart_push_device;
} thread;

/* The read of the caller's thread on job :id (messages_read_thread). */
static db_read thread_read(hs_req *req, const char *requested_provider) {
  return messages_read_thread(&req->arena, hs_role_name(req->auth.role_bit), req->auth.id, hs_param(req, "id"),
                              requested_provider);
}

/* The caller's thread from its read r. 404 when the job is not the caller's to message about,
 * 400 when a customer names no thread and none is assigned. */
static err_t open_thread(hs_req *req, const char *requested_provider, const db_res *r, thread *t) {
  if (r->rows == 0) return hs_not_found(req, "Job");
  t->job_id = db_field(r, 0, "id"), t->customer_id = db_field(r, 0, "customer_id"),
  t->status = db_field(r, 0, "status");
  bool customer = req->auth.role_bit == ROLE_USER;
  if (customer) {
    if (strcmp(t->customer_id, req->auth.id)) return hs_not_found(req, "Job");
    t->provider_id = requested_provider ? requested_provider : db_field(r, 0, "provider_id");
    if (!t->provider_id) return hs_fail_invalid(req, "providerId: is required until a provider is assigned");
  } else {
    t->provider_id = req->auth.id;
  }
  t->sender_name = db_field(r, 0, "sender_name");
  if (!t->sender_name)
    return hs_fail(req, ERR_NOT_FOUND, customer ? "No thread with that provider on this job" : "Job not found");
  t->counterpart_push_device = db_field(r, 0, "counterpart_push_device");
  return ERR_OK;
}

/* Reads and opens the caller's thread on job :id (one round trip). */
static err_t find_thread(hs_req *req, const char *requested_provider, thread *t) {
  db_read r = thread_read(req, requested_provider);
  db_res *row;
  err_t e = db_to_err(db_query(&req->arena, &row, r.sql, r.params, r.n));
  return e == ERR_OK ? open_thread(req, requested_provider, row, t) : e;
}

#define PHOTO_PREFIX "[IMAGE]"

const hs_rj_field MESSAGES_JSON[] = {
    {"id", "id", RJ_STR},
    {"senderId", "sender_id", RJ_STR},
    {"senderRole", "sender_role", RJ_STR},
    {"senderName", "sender_name", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

void messages_write_members(arena *a, jw *w, const hs_rj *b, const db_res *r, int i) {
  hs_rj_members(w, b, r, i);
  const char *content = db_field(r, i, "content");
  jw_key(w, "content");
  const char *key = content && str_starts_with(content, PHOTO_PREFIX) ? content + strlen(PHOTO_PREFIX) : NULL;
  if (!key || !storage_key_valid(key)) return jw_str(w, content);
  int64_t expires = storage_url_expiry(URL_TTL_PHOTO);
  char url[1024];
  size_t n = storage_url_at(key, expires, url, sizeof url);
  jw_str(w, n < sizeof url ? arena_printf(a, PHOTO_PREFIX "%s", url) : content);
  if (!storage_has_variants(key) || n >= sizeof url) return;
  storage_variants_open(w); /* the photo's, keyed by its link as content holds it after the prefix */
  storage_variants_add(w, key, expires);
  storage_variants_close(w);
}

/* Writes message row i of r (MESSAGES_JSON bound as b) as one object. */
static void write_message(arena *a, jw *w, const hs_rj *b, const db_res *r, int i) {
  jw_obj(w);
  messages_write_members(a, w, b, r, i);
  jw_obj_end(w);
}

err_t api_messages_list(hs_req *req) {
  /* the thread and its page in one round trip: the page is thrown away unless the thread is
   * the caller's. A cursor is bound to the thread as the request names it (providerId, or
   * none: the assigned provider's), and a thread that is not the caller's answers before a
   * cursor that is not valid. */
  const char *requested = json_string_value(json_object_get(req->query, "providerId"));
  const char *scope = req->auth.role_bit == ROLE_USER ? requested : req->auth.id;
  const char *order = hs_query_str(req, "order");
  const db_keyset *ks = order && !strcmp(order, "desc") ? &MESSAGES_DESC_KEYSET : &MESSAGES_KEYSET;
  db_page pg;
  err_t page = hs_page_begin(req, ks, scope ? scope : "assigned", 0, &pg);
  db_read reads[2] = {thread_read(req, requested)};
  if (!page) reads[1] = messages_read_list(&req->arena, hs_param(req, "id"), scope, &pg);
  err_t e = db_to_err(db_query_all(&req->arena, reads, page ? 1 : 2));
  thread t;
  if (e == ERR_OK) e = open_thread(req, requested, reads[0].res, &t);
  if (e == ERR_OK && page) e = page;
  db_res *r = reads[1].res;
  if (e == ERR_OK) e = hs_page_end(req, &pg, r);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 256 * (size_t)(r->rows + 1));
  hs_rj *b = hs_rj_bind(&req->arena, MESSAGES_JSON, r);
  jw_obj(w);
  jw_key(w, "messages");
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) write_message(&req->arena, w, b, r, i);
  jw_arr_end(w);
  hs_page_jw_next(w, &pg);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* Posts content to the caller's thread: 409 on a cancelled job, 429 at the cap. */
static err_t post_message(hs_req *req, thread *t, const char *content) {
  if (!strcmp(t->status, "CANCELLED"))
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job is cancelled");
  char id[ID_LEN + 1];
  id_new(id);
  message_new m = {.id = id,
                   .job_id = t->job_id,
                   .provider_id = t->provider_id,
                   .sender_id = req->auth.id,
                   .sender_role = hs_role_name(req->auth.role_bit),
                   .sender_name = t->sender_name,
                   .content = content,
                   .customer_id = t->customer_id,
                   .push_device = t->counterpart_push_device};
  bool from_customer = req->auth.role_bit == ROLE_USER;
  m.note = (notice){.account_id = from_customer ? t->provider_id : t->customer_id,
                    .role = from_customer ? "provider" : "user",
                    .title = arena_printf(&req->arena, "New message from %s", t->sender_name),
                    .body = str_starts_with(content, PHOTO_PREFIX) ? "Sent a photo" : content,
                    .job_id = t->job_id};
  db_res *r;
  err_t e = messages_store_post(&req->arena, &m, &r);
  if (e != ERR_OK) return e;
  if (r->rows == 0) {
    req->retry_after = 0;
    return hs_fail_code(req, ERR_RATE_LIMITED, ERR_CODE_THREAD_FULL, "This thread has reached 250 messages");
  }
  jw *w = hs_jw(req, 512);
  write_message(&req->arena, w, hs_rj_bind(&req->arena, MESSAGES_JSON, r), r, 0);
  return hs_ok_jw(req, w);
}

err_t api_messages_post(hs_req *req) {
  /* the prefix marks photo messages, which apps render from the URL after it: a text
   * message must not pass for one (it could make the other party's app load any address) */
  if (str_starts_with(hs_body_str(req, "content"), PHOTO_PREFIX))
    return hs_fail_invalid(req, "content: must not start with [IMAGE]");
  thread t;
  err_t e = find_thread(req, hs_body_str(req, "providerId"), &t);
  return e == ERR_OK ? post_message(req, &t, hs_body_str(req, "content")) : e;
}

err_t api_messages_photo(hs_req *req) {
  thread t;
  err_t e = find_thread(req, hs_body_str(req, "providerId"), &t);
  if (e != ERR_OK) return e;
  if (!strcmp(t.status, "CANCELLED"))
    return hs_fail_code(req, ERR_CONFLICT, ERR_CODE_INVALID_STATE, "The job is cancelled");
  int n;
  hs_upload **files = hs_files(req, "photo", &n);
  char key[STORAGE_KEY_LEN], err[256];
  if (!storage_save(files[0]->path, files[0]->ext, files[0]->mime, key, err)) return hs_fail(req, ERR_INTERNAL, NULL);
  e = post_message(req, &t, arena_printf(&req->arena, PHOTO_PREFIX "%s", key));
  if (e != ERR_OK) storage_delete(key);
  return e;
}

err_t api_messages_read(hs_req *req) {
  thread t;
  err_t e = find_thread(req, hs_body_str(req, "providerId"), &t);
  if (e != ERR_OK) return e;
  if ((e = messages_store_mark_read(t.job_id, t.provider_id, hs_role_name(req->auth.role_bit))) != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b}", "ok", 1);
}

/* A thread: its job, and the other side (the role added by the handler). */
static const hs_rj_field THREAD[] = {{"jobId", "job_id", RJ_STR}, {"service", "service", RJ_STR}, {0}};
static const hs_rj_field COUNTERPART[] = {{"id", "counterpart_id", RJ_STR}, {"name", "counterpart_name", RJ_STR}, {0}};

err_t api_messages_threads(hs_req *req) {
  const char *role = hs_role_name(req->auth.role_bit);
  db_res *r;
  db_page pg;
  err_t e = hs_page_begin(req, &THREADS_KEYSET, NULL, 0, &pg);
  if (!e) e = messages_store_threads(&req->arena, role, req->auth.id, &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  if (e != ERR_OK) return e;
  arena *a = &req->arena;
  hs_rj *head = hs_rj_bind(a, THREAD, r), *other = hs_rj_bind(a, COUNTERPART, r),
        *last = hs_rj_bind(a, MESSAGES_JSON, r);
  int unread = db_col(r, "unread_count"), at = db_col(r, "created_at");
  jw *w = hs_jw(req, 512 * (size_t)(r->rows + 1));
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) {
    jw_obj(w);
    hs_rj_members(w, head, r, i);
    hs_rj_open(w, "counterpart", other, r, i);
    jw_key_str(w, "role", strcmp(role, "user") ? "user" : "provider");
    jw_obj_end(w);
    jw_key(w, "lastMessage");
    write_message(a, w, last, r, i);
    jw_key(w, "unreadCount");
    jw_int(w, db_int(r, i, unread));
    jw_key(w, "updatedAt");
    jw_cell_iso(w, db_text(r, i, at));
    jw_obj_end(w);
  }
  jw_arr_end(w);
  return hs_ok_jw(req, w);
}

/* ---- the account's part (domain/domain.h) ---- */

err_t messages_export_in(db_conn *c, const account_ref *who, account_export *x) {
  db_res *r;
  err_t e = account_read_in(c, x->a, who, MESSAGES_EXPORT_SQL, 1, &r);
  if (e) return e;
  hs_rj *b = hs_rj_bind(x->a, MESSAGES_JSON, r);
  jw *w = account_export_member(x, "messages");
  jw_arr(w);
  for (int i = 0; i < r->rows; i++) { /* the Message JSON and the thread it is in */
    jw_obj(w);
    messages_write_members(x->a, w, b, r, i);
    jw_key(w, "jobId");
    jw_str(w, db_field(r, i, "job_id"));
    jw_key(w, "providerId");
    jw_str(w, db_field(r, i, "provider_id"));
    jw_obj_end(w);
  }
  jw_arr_end(w);
  return ERR_OK;
}
