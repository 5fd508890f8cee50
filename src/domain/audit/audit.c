/* The audit domain: appends (actions and impersonated requests), its start-up (a warning when
 * production keys the chain from JWT_SECRET, the checkpoint thread) and shutdown (the last
 * checkpoint). The chain's pure parts are in audit_chain.c, its SQL in audit_store.c, the
 * checkpoints in audit_checkpoint.c and `audit verify` in audit_verify.c. */
#include "domain/audit/audit.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "domain/audit/audit_chain.h"
#include "domain/audit/audit_checkpoint.h"
#include "domain/audit/audit_store.h"
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>

/* Appends r on c and, once committed, tells the checkpoint thread how far the chain got. */
static err_t append(db_conn *c, arena *a, audit_record *r) {
  err_t e = db_to_err(audit_store_append(c, a, r));
  if (!e) db_on_commit(c, audit_checkpoint_appended, (void *)(intptr_t)r->seq);
  return e;
}

err_t audit_log_in(db_conn *c, const audit_action *act) {
  arena a;
  arena_init(&a);
  char *detail = NULL;
  if (act->detail) {
    json_t *redacted = audit_redact(act->detail);
    detail = json_dumps(redacted, JSON_COMPACT);
    json_decref(redacted);
  }
  audit_record r = {.kind = "action",
                    .actor_id = act->actor_id,
                    .actor_role = act->actor_role,
                    .action = act->action,
                    .target_id = act->target_id,
                    .target_role = act->target_role,
                    .body = detail,
                    .created_at = clock_now_ms()};
  err_t e = append(c, &a, &r);
  free(detail);
  arena_fini(&a);
  return e;
}

err_t audit_log(const audit_action *act) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = audit_log_in(c, act);
  return db_end(c, e);
}

/* ---- impersonated requests ---- */

static bool blank(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isspace((unsigned char)s[i])) return false;
  return true;
}

/* The body as recorded: JSON with credentials redacted; for multipart, the names of the text
 * fields and of the files, never their contents. Heap text or NULL (no body). */
static char *recorded_body(hs_req *req) {
  json_t *v;
  if (req->route && req->route->upload) {
    json_t *fields = json_array(), *files = json_array();
    json_t *name;
    size_t n;
    json_array_foreach(req->form_fields, n, name) {
      json_array_append_new(fields, json_string(audit_clean_text(&req->arena, json_string_value(name))));
    }
    for (int i = 0; i < req->nuploads; i++)
      json_array_append_new(files, json_pack("{s:s,s:s}", "field", audit_clean_text(&req->arena, req->uploads[i].field),
                                             "filename", audit_clean_text(&req->arena, req->uploads[i].filename)));
    v = json_pack("{s:o,s:o}", "fields", fields, "files", files);
  } else if (!req->raw_len || blank(req->raw_body, req->raw_len)) {
    return NULL;
  } else {
    json_t *parsed = json_loadb(req->raw_body, req->raw_len, JSON_ALLOW_NUL, NULL);
    v = parsed ? audit_redact(parsed) : json_sprintf("[unparsable body: %zu bytes]", req->raw_len);
    json_decref(parsed);
  }
  char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
  json_decref(v);
  return text;
}

static err_t append_request(db_conn *c, hs_req *req) {
  hs_impersonation *imp = &req->impersonation;
  char *body = recorded_body(req);
  audit_record r = {.kind = "request",
                    .elevation_id = imp->elevation_id,
                    .actor_id = imp->staff_id,
                    .target_id = req->auth.id,
                    .target_role = req->auth.role,
                    .method = req->method,
                    .path = audit_clean_text(&req->arena, req->path),
                    .body = body,
                    .created_at = clock_now_ms()};
  err_t e = append(c, &req->arena, &r);
  free(body);
  if (!e) imp->request_seq = r.seq;
  return e;
}

err_t audit_impersonated_request(hs_req *req) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = append_request(c, req);
  if (db_end(c, e) == ERR_OK) return ERR_OK;
  req->impersonation.request_seq = 0;
  return ERR_UNAVAILABLE;
}

void audit_impersonated_outcome(hs_req *req) {
  const hs_impersonation *imp = &req->impersonation;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e && !imp->request_seq) e = append_request(c, req);
  audit_record r = {.kind = "outcome",
                    .elevation_id = imp->elevation_id,
                    .actor_id = imp->staff_id,
                    .status = hs_status(req),
                    .ref_seq = imp->request_seq,
                    .created_at = clock_now_ms()};
  if (!e) e = append(c, &req->arena, &r);
  if (db_end(c, e) != ERR_OK)
    log_msg(LOG_ERROR, "audit: the outcome of request %s (elevation %s) was not recorded", req->request_id,
            imp->elevation_id);
}

err_t audit_sessions_events(arena *a, db_res **out) { return db_to_err(audit_store_sessions_events(a, out)); }

const db_keyset AUDIT_ACTOR_KEYSET = {"audit", {{"l.seq", "seq", 'i', true}}};

err_t audit_of_actor(arena *a, const char *actor_id, const db_page *pg, db_res **out) {
  return audit_store_of_actor(a, actor_id, pg, out);
}

/* ---- the domain ---- */

static void audit_init(void) {
  if (CFG.env == ENV_PRODUCTION && !CFG.audit_key)
    log_msg(LOG_WARN, "AUDIT_KEY is unset: the audit chain is keyed with a key derived from JWT_SECRET; set AUDIT_KEY "
                      "and keep it off the database host (docs/operations.md)");
  audit_checkpoints_start();
}

const domain_def audit_domain = {.name = "audit", .init = audit_init, .stop = audit_checkpoints_stop};
