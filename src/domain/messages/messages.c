/* Handlers, SQL and routes of the message threads (a small domain kept in one file).
 * The 250-message cap is enforced by the insert itself (INSERT ... SELECT ... WHERE the
 * thread holds fewer than 250), inside a transaction that first locks the job's row, so
 * concurrent posts never overshoot it. */
#include "domain/messages/messages.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/jobs/jobs.h"
#include "domain/notifications/notifications.h"
#include "ext/filetype.h"
#include "ext/storage.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

#define THREAD_CAP 250

typedef struct thread {
  const char *job_id, *provider_id, *customer_id, *status;
  const char *sender_name;
} thread;

/* Resolves the caller's thread on job :id. 404 when the job is not the caller's to message
 * about, 400 when a customer names no thread and none is assigned. */
static err_t open_thread(hs_req *req, const char *requested_provider, thread *t) {
  db_res *job;
  err_t e = jobs_get(&req->arena, hs_param(req, "id"), &job);
  if (e == ERR_NOT_FOUND) return hs_fail(req, e, "Job not found");
  if (e != ERR_OK) return e;
  t->job_id = db_field(job, 0, "id"), t->customer_id = db_field(job, 0, "customer_id"),
  t->status = db_field(job, 0, "status");
  const char *assigned = db_field(job, 0, "provider_id");
  db_res *who;
  if (req->auth.role_bit == ROLE_USER) {
    if (strcmp(t->customer_id, req->auth.id)) return hs_fail(req, ERR_NOT_FOUND, "Job not found");
    t->provider_id = requested_provider ? requested_provider : assigned;
    if (!t->provider_id) return hs_fail(req, ERR_BAD_REQUEST, "providerId: is required until a provider is assigned");
    if (db_query(&req->arena, &who,
                 "SELECT u.name FROM users u WHERE u.id = $1 AND (EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = $2 "
                 "AND q.provider_id = $3) OR $3 = $4)",
                 DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(t->job_id), DB_TEXT(t->provider_id),
                         DB_TEXT(assigned ? assigned : ""))) != DB_OK)
      return ERR_INTERNAL;
    if (who->rows == 0) return hs_fail(req, ERR_NOT_FOUND, "No thread with that provider on this job");
  } else {
    t->provider_id = req->auth.id;
    if (db_query(
            &req->arena, &who,
            "SELECT p.name FROM providers p WHERE p.id = $1 AND (EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = $2 "
            "AND q.provider_id = $1) OR $1 = $3)",
            DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(t->job_id), DB_TEXT(assigned ? assigned : ""))) != DB_OK)
      return ERR_INTERNAL;
    if (who->rows == 0) return hs_fail(req, ERR_NOT_FOUND, "Job not found");
  }
  t->sender_name = db_text(who, 0, 0);
  return ERR_OK;
}

static const hs_rj_field MESSAGE[] = {
    {"id", "id", RJ_STR},
    {"senderId", "sender_id", RJ_STR},
    {"senderRole", "sender_role", RJ_STR},
    {"senderName", "sender_name", RJ_STR},
    {"content", "content", RJ_STR},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};
#define MESSAGE_COLUMNS "id, sender_id, sender_role, sender_name, content, created_at"

static err_t api_messages_list(hs_req *req) {
  thread t;
  err_t e = open_thread(req, json_string_value(json_object_get(req->query, "providerId")), &t);
  if (e != ERR_OK) return e;
  db_res *r;
  if (db_query(&req->arena, &r,
               "SELECT " MESSAGE_COLUMNS " FROM messages WHERE job_id = $1 AND provider_id = $2 ORDER BY seq",
               DB_ARGS(DB_TEXT(t.job_id), DB_TEXT(t.provider_id))) != DB_OK)
    return ERR_INTERNAL;
  jw *w = hs_jw(req, 256 * (size_t)(r->rows + 1));
  jw_obj(w);
  jw_key(w, "messages");
  hs_rj_array(w, &req->arena, MESSAGE, r);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* Posts content to the caller's thread: 409 on a cancelled job, 429 at the cap. */
static err_t post_message(hs_req *req, thread *t, const char *content) {
  if (!strcmp(t->status, "CANCELLED")) return hs_fail(req, ERR_CONFLICT, "The job is cancelled");
  char id[ID_LEN + 1];
  id_new(id);
  const char *role = req->auth.role_bit == ROLE_PROVIDER ? "provider" : "user";
  int64_t now = clock_now_ms();
  db_res *r = NULL;
  /* the no-op update locks the job's row (PostgreSQL) or the database (SQLite) for the
   * transaction, so concurrent posts count the thread one after another */
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK) rc = db_exec(c, NULL, NULL, "UPDATE jobs SET id = id WHERE id = $1", DB_ARGS(DB_TEXT(t->job_id)));
  if (rc == DB_OK)
    rc = db_exec(
        c, &req->arena, &r,
        "INSERT INTO messages (id, job_id, provider_id, sender_id, sender_role, sender_name, content, "
        "created_at, seq) SELECT $1, $2, $3, $4, $5, $6, $7, $8, $10 WHERE "
        "(SELECT COUNT(*) FROM messages WHERE job_id = $2 AND provider_id = $3) < $9 RETURNING " MESSAGE_COLUMNS,
        DB_ARGS(DB_TEXT(id), DB_TEXT(t->job_id), DB_TEXT(t->provider_id), DB_TEXT(req->auth.id), DB_TEXT(role),
                DB_TEXT(t->sender_name), DB_TEXT(content), DB_INT(now), DB_INT(THREAD_CAP), DB_INT(clock_sequence())));
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  if (rc != DB_OK) return ERR_INTERNAL;
  if (r->rows == 0) {
    req->retry_after = 0;
    return hs_fail(req, ERR_RATE_LIMITED, "This thread has reached 250 messages");
  }
  bool from_customer = req->auth.role_bit == ROLE_USER;
  notify(from_customer ? t->provider_id : t->customer_id, from_customer ? "provider" : "user",
         arena_printf(&req->arena, "New message from %s", t->sender_name),
         strncmp(content, "[IMAGE]", 7) ? content : "Sent a photo", t->job_id);
  jw *w = hs_jw(req, 512);
  hs_rj_object(w, hs_rj_bind(&req->arena, MESSAGE, r), r, 0);
  return hs_ok_jw(req, w);
}

static err_t api_messages_post(hs_req *req) {
  /* the prefix marks photo messages, which apps render from the URL after it: a text
   * message must not pass for one (it could make the other party's app load any address) */
  if (!strncmp(hs_body_str(req, "content"), "[IMAGE]", 7))
    return hs_fail(req, ERR_BAD_REQUEST, "content: must not start with [IMAGE]");
  thread t;
  err_t e = open_thread(req, hs_body_str(req, "providerId"), &t);
  return e == ERR_OK ? post_message(req, &t, hs_body_str(req, "content")) : e;
}

static err_t api_messages_photo(hs_req *req) {
  thread t;
  err_t e = open_thread(req, hs_body_str(req, "providerId"), &t);
  if (e != ERR_OK) return e;
  if (!strcmp(t.status, "CANCELLED")) return hs_fail(req, ERR_CONFLICT, "The job is cancelled");
  int n;
  hs_upload **files = hs_files(req, "photo", &n);
  char key[STORAGE_KEY_LEN], err[256];
  if (!storage_save(files[0]->path, files[0]->ext, files[0]->mime, key, err)) return hs_fail(req, ERR_INTERNAL, NULL);
  char *url = storage_url(key, URL_TTL_PHOTO);
  char *content = arena_printf(&req->arena, "[IMAGE]%s", url);
  free(url);
  e = post_message(req, &t, content);
  if (e != ERR_OK) storage_delete(key);
  return e;
}

static const hs_field post_fields[] = {
    {"content", F_STRING, F_REQUIRED, LEN(1, 2000)},
    {"providerId", F_STRING, 0, LEN(1, 64)},
    {0},
};
static const hs_schema post_schema = {post_fields};
static const hs_field thread_fields[] = {{"providerId", F_STRING, 0, LEN(1, 64)}, {0}};
static const hs_schema thread_query = {thread_fields};
static const hs_file_rule photo_files[] = {{"photo", 1, 10 * 1024 * 1024, FT_IMAGES}, {0}};
static const hs_upload_spec photo_upload = {photo_files, 1, "No file uploaded", &thread_query};

const hs_route MESSAGES_ROUTES[] = {
    {HS_GET, "/jobs/:id/messages", api_messages_list, ROLE_USER | ROLE_PROVIDER, .query = &thread_query,
     .summary = "A job's message thread", .response = "MessageList", .errors = "404"},
    {HS_POST, "/jobs/:id/messages", api_messages_post, ROLE_USER | ROLE_PROVIDER, &post_schema, .ok = 201,
     .summary = "Post a message", .response = "Message", .errors = "404 429"},
    {HS_POST, "/jobs/:id/messages/photo", api_messages_photo, ROLE_USER | ROLE_PROVIDER, .upload = &photo_upload,
     .ok = 201, .summary = "Post a photo message", .response = "Message", .errors = "404 409 429"},
};
const size_t MESSAGES_ROUTES_LEN = ARRAY_LEN(MESSAGES_ROUTES);
