/* Notifications. A notification row and its push job are written in one transaction; the
 * queue worker posts the push to PUSH_URL ({to, title, body, data}, Expo's message format)
 * or, without PUSH_URL, logs it. */
#include "domain/notifications/notifications.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "ext/fetch.h"
#include "ext/queue.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const token_sql[] = {"SELECT push_token FROM users WHERE id = $1",
                                        "SELECT push_token FROM providers WHERE id = $1"};

/* Records n; with token_known, pushes to push_token (if any) instead of looking it up. */
static db_rc record(db_conn *c, const notice *n, bool token_known, const char *push_token) {
  bool provider = !strcmp(n->role, "provider");
  char id[ID_LEN + 1];
  id_new(id);
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, NULL, NULL,
                     "INSERT INTO notifications (id, account_id, role, title, body, job_id, created_at, seq) "
                     "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(n->account_id), DB_TEXT(n->role), DB_TEXT(n->title), DB_TEXT(n->body),
                             DB_TEXT(n->job_id), DB_INT(clock_now_ms()), DB_INT(clock_sequence())));
  if (rc == DB_OK && !token_known) {
    rc = db_exec(c, &a, &r, token_sql[provider], DB_ARGS(DB_TEXT(n->account_id)));
    push_token = rc == DB_OK && r->rows ? db_text(r, 0, 0) : NULL;
  }
  if (rc == DB_OK && push_token) {
    json_t *push = json_pack("{s:s,s:s,s:s,s:{s:s?}}", "to", push_token, "title", n->title, "body", n->body, "data",
                             "jobId", n->job_id);
    rc = queue_enqueue(c, "push", push);
    json_decref(push);
  }
  arena_fini(&a);
  return rc;
}

db_rc notify_in(db_conn *c, const notice *n) { return record(c, n, false, NULL); }

db_rc notify_in_token(db_conn *c, const notice *n, const char *push_token) { return record(c, n, true, push_token); }

void notify(const char *account_id, const char *role, const char *title, const char *body, const char *job_id) {
  notice n = {account_id, role, title, body, job_id};
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK) rc = notify_in(c, &n);
  if (queue_commit(c, rc) != DB_OK) log_msg(LOG_ERROR, "recording a notification for %s failed", account_id);
}

db_rc notify_matching_providers_in(db_conn *c, const char *service, const char *zip, const char *title,
                                   const char *body, const char *job_id) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc =
      db_exec(c, &a, &r,
              "SELECT s.provider_id FROM provider_services s JOIN provider_zips z ON z.provider_id = s.provider_id "
              "WHERE s.service = $1 AND z.zip = $2",
              DB_ARGS(DB_TEXT(service), DB_TEXT(zip)));
  for (int i = 0; rc == DB_OK && i < r->rows; i++) {
    notice n = {db_text(r, i, 0), "provider", title, body, job_id};
    rc = notify_in(c, &n);
  }
  arena_fini(&a);
  return rc;
}

/* Queue handler: one push message to the push service. */
static bool send_push(json_t *msg, char err[256]) {
  if (!CFG.push_url) { /* never the device token or the text: they identify and speak for a person */
    json_t *job = json_object_get(json_object_get(msg, "data"), "jobId");
    log_json(LOG_INFO, "push skipped: PUSH_URL is not set", json_pack("{s:O?}", "jobId", job));
    return true;
  }
  long status = 0;
  fetch_rc rc = fetch_post_json(CFG.push_url, msg, 15000, &status);
  if (rc == FETCH_TIMEOUT || rc == FETCH_UNREACHABLE || status >= 500 || status == 429) {
    snprintf(err, 256, "push service: %s", rc == FETCH_TIMEOUT ? "timed out" : rc == FETCH_UNREACHABLE ? "unreachable" : "server error");
    return false; /* retried with backoff */
  }
  if (status >= 400) log_msg(LOG_WARN, "push service refused a message (%ld)", status); /* not retried */
  return true;
}

void notifications_domain_init(void) { queue_register("push", send_push); }
