/* Account and reset-token storage. A token row is deleted by the same conditional statement
 * that proves it live, so a token can be used once even by two concurrent requests. */
#include "domain/auth/auth_store.h"
#include "core/clock.h"
#include "core/ids.h"
#include "domain/auth/auth.h"
#include "domain/auth/auth_tokens_store.h"
#include "domain/events/events.h"
#include "domain/notifications/notifications.h"
#include "ext/mail.h"
#include "ext/queue.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const find_sql[] = {
    [ACCOUNT_USER] = "SELECT id, email, name, password_hash, token_gen FROM users WHERE email = $1",
    [ACCOUNT_PROVIDER] = "SELECT id, email, name, password_hash, token_gen FROM providers WHERE email = $1",
};

/* A deleted account (its row kept, erased, for the ledger) is no account here. */
static const char *const get_sql[] = {
    [ACCOUNT_USER] = "SELECT id, email, name, password_hash, token_gen FROM users WHERE id = $1 AND deleted_at IS NULL",
    [ACCOUNT_PROVIDER] =
        "SELECT id, email, name, password_hash, token_gen FROM providers WHERE id = $1 AND deleted_at IS NULL",
};

static const char *const table_of[] = {[ACCOUNT_USER] = "users", [ACCOUNT_PROVIDER] = "providers"};
static const char *const role_of[] = {[ACCOUNT_USER] = "user", [ACCOUNT_PROVIDER] = "provider"};

static err_t find_one(arena *a, const char *sql, const char *key, account *out, bool *found) {
  db_res *r;
  if (db_query(a, &r, sql, DB_ARGS(DB_TEXT(key))) != DB_OK) return ERR_INTERNAL;
  *found = r->rows > 0;
  if (*found) *out = (account){db_text(r, 0, 0), db_text(r, 0, 1), db_text(r, 0, 2), db_text(r, 0, 3), db_int(r, 0, 4)};
  return ERR_OK;
}

err_t auth_store_find(arena *a, account_kind kind, const char *email, account *out, bool *found) {
  return find_one(a, find_sql[kind], email, out, found);
}

err_t auth_store_get(arena *a, account_kind kind, const char *id, account *out, bool *found) {
  return find_one(a, get_sql[kind], id, out, found);
}

db_rc auth_insert_user_in(db_conn *c, const char *id, const char *email, const char *hash, const char *name,
                          const char *address, const char *zip) {
  int64_t now = clock_now_ms();
  return db_exec(
      c, NULL, NULL,
      "INSERT INTO users (id, email, password_hash, name, address, zip, created_at, updated_at) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
      DB_ARGS(DB_TEXT(id), DB_TEXT(email), DB_TEXT(hash), DB_TEXT(name), DB_TEXT(address), DB_TEXT(zip), DB_INT(now)));
}

/* The outcome of a change that ended with e (db_end's): the unique email's refusal, a failure, or
 * done. */
static auth_outcome outcome_of(err_t e) {
  return e == ERR_OK ? AUTH_DONE : e == ERR_CONFLICT ? AUTH_EMAIL_TAKEN : AUTH_FAILED;
}

auth_outcome auth_store_insert_user(const char *id, const char *email, const char *hash, const char *name,
                                    const char *address, const char *zip, const session_row *s,
                                    const session_grant *g) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(auth_insert_user_in(c, id, email, hash, name, address, zip));
  if (!e) e = db_to_err(auth_store_session_open_in(c, s, g, clock_now_ms()));
  return outcome_of(db_end(c, e));
}

static auth_lists_writer lists_writer;

void auth_follow_provider_lists(auth_lists_writer write) { lists_writer = write; }

db_rc auth_insert_provider_in(db_conn *c, const char *id, const char *email, const char *hash, const char *name,
                              const char *phone, json_t *services, json_t *zips) {
  int64_t now = clock_now_ms();
  char *services_text = json_dumps(services, JSON_COMPACT), *zips_text = json_dumps(zips, JSON_COMPACT);
  /* nothing waits for an answer: on PostgreSQL the whole registration goes with the COMMIT, and
   * a taken email (the unique index) is the COMMIT's DB_CONSTRAINT */
  db_rc rc =
      db_exec_later(c, NULL, NULL,
                    "INSERT INTO providers (id, email, password_hash, name, phone, services, service_zips, created_at, "
                    "updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)",
                    DB_ARGS(DB_TEXT(id), DB_TEXT(email), DB_TEXT(hash), DB_TEXT(name), DB_TEXT(phone),
                            DB_TEXT(services_text), DB_TEXT(zips_text), DB_INT(now)));
  free(services_text), free(zips_text);
  if (rc == DB_OK) rc = lists_writer ? lists_writer(c, id, services, zips, now) : DB_ERROR;
  return rc;
}

auth_outcome auth_store_insert_provider(const char *id, const char *email, const char *hash, const char *name,
                                        const char *phone, json_t *services, json_t *zips, const session_row *s,
                                        const session_grant *g) {
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(auth_insert_provider_in(c, id, email, hash, name, phone, services, zips));
  if (!e) e = db_to_err(auth_store_session_open_in(c, s, g, clock_now_ms()));
  return outcome_of(db_end(c, e));
}

err_t auth_store_put_reset(const char *email, const char *role, const char *account_id, const char *token_hash,
                           int64_t expires_at, const char *mail_subject, const char *mail_body) {
  char id[ID_LEN + 1];
  id_new(id);
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL, "DELETE FROM password_reset_tokens WHERE email = $1 AND role = $2",
                          DB_ARGS(DB_TEXT(email), DB_TEXT(role)));
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "INSERT INTO password_reset_tokens (id, token_hash, email, role, account_id, expires_at, "
                          "created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(token_hash), DB_TEXT(email), DB_TEXT(role), DB_TEXT(account_id),
                                  DB_INT(expires_at), DB_INT(clock_now_ms()))));
  if (!e) e = db_to_err(mail_enqueue(c, email, mail_subject, mail_body));
  return db_end(c, e);
}

/* The first cell of the first row of sql ($1 = hash, $2 = now) in *text, *found whether there was
 * a row (*text NULL when not). */
static err_t first_cell_of_hash(arena *a, const char *sql, const char *hash, const char **text, bool *found) {
  db_res *r;
  if (db_query(a, &r, sql, DB_ARGS(DB_TEXT(hash), DB_INT(clock_now_ms()))) != DB_OK) return ERR_INTERNAL;
  *found = r->rows > 0;
  *text = *found ? db_text(r, 0, 0) : NULL;
  return ERR_OK;
}

err_t auth_store_find_reset(arena *a, const char *token_hash, const char **role, bool *found) {
  return first_cell_of_hash(a, "SELECT role FROM password_reset_tokens WHERE token_hash = $1 AND expires_at > $2",
                            token_hash, role, found);
}

auth_outcome auth_store_use_reset(arena *a, const char *token_hash, const char *new_hash, const char **role,
                                  const char **email) {
  db_res *r, *u;
  db_conn *c;
  bool gone = false;
  err_t e = db_begin_exec(&c, a, &r,
                          "DELETE FROM password_reset_tokens WHERE token_hash = $1 AND expires_at > $2 "
                          "RETURNING email, role, account_id",
                          DB_ARGS(DB_TEXT(token_hash), DB_INT(clock_now_ms())));
  if (!e && r->rows == 0) gone = true, e = ERR_NOT_FOUND;
  if (!e) { /* the account it was made for (a token from before ids were kept: its email's) */
    *role = db_text(r, 0, 1);
    bool provider = !strcmp(*role, "provider"), by_id = !db_isnull(r, 0, 2);
    char sql[200];
    snprintf(sql, sizeof sql,
             "UPDATE %s SET password_hash = $1, token_gen = token_gen + 1, updated_at = $2 "
             "WHERE %s = $3 AND deleted_at IS NULL RETURNING id, email",
             provider ? "providers" : "users", by_id ? "id" : "email");
    e = db_to_err(db_exec(c, a, &u, sql,
                          DB_ARGS(DB_TEXT(new_hash), DB_INT(clock_now_ms()), DB_TEXT(db_text(r, 0, by_id ? 2 : 0)))));
    if (!e && u->rows == 1) /* the reset ends a pending email change, as every token */
      e = db_to_err(db_exec(c, NULL, NULL, "DELETE FROM email_changes WHERE account_id = $1 AND role = $2",
                            DB_ARGS(DB_TEXT(db_text(u, 0, 0)), DB_TEXT(*role))));
    if (!e && u->rows == 1) /* and every session */
      e = db_to_err(auth_store_sessions_end_all_in(c, *role, db_text(u, 0, 0), clock_now_ms()));
  }
  if (!e && u->rows == 0) gone = true, e = ERR_NOT_FOUND; /* the account was deleted since the token was issued */
  if (!e) *email = db_text(u, 0, 1);
  if (!e) e = db_to_err(events_tokens_ended_in(c, db_text(u, 0, 0), false)); /* its streams end */
  e = db_end(c, e);
  return gone ? AUTH_RESET_GONE : e ? AUTH_FAILED : AUTH_DONE;
}

/* ---- the owner's account management ---- */

/* Ends the account's pending email change, on c (its links then answer "no longer valid"). */
static db_rc end_email_change_in(db_conn *c, account_kind kind, const char *id) {
  return db_exec(c, NULL, NULL, "DELETE FROM email_changes WHERE account_id = $1 AND role = $2",
                 DB_ARGS(DB_TEXT(id), DB_TEXT(role_of[kind])));
}

err_t auth_store_change_password(account_kind kind, const char *id, const char *new_hash, const char *mail_subject,
                                 const char *mail_body, int64_t *gen) {
  char sql[200];
  snprintf(sql, sizeof sql,
           "UPDATE %s SET password_hash = $2, token_gen = token_gen + 1, updated_at = $3 "
           "WHERE id = $1 AND deleted_at IS NULL RETURNING token_gen, email",
           table_of[kind]);
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c;
  err_t e = db_begin_exec(&c, &a, &r, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(new_hash), DB_INT(clock_now_ms())));
  if (!e && r->rows == 0) e = ERR_NOT_FOUND;
  if (!e) {
    *gen = db_int(r, 0, 0);
    e = db_to_err(db_exec(c, NULL, NULL,
                          "DELETE FROM password_reset_tokens WHERE role = $2 AND (account_id = $3 OR email = $1)",
                          DB_ARGS(DB_TEXT(db_text(r, 0, 1)), DB_TEXT(role_of[kind]), DB_TEXT(id))));
  }
  if (!e) e = db_to_err(end_email_change_in(c, kind, id));
  if (!e) e = db_to_err(auth_store_sessions_end_all_in(c, role_of[kind], id, clock_now_ms()));
  if (!e) e = db_to_err(mail_enqueue(c, db_text(r, 0, 1), mail_subject, mail_body));
  if (!e) e = db_to_err(events_tokens_ended_in(c, id, false)); /* its streams end */
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

/* Refuses ask when its account asked too often in the last hour, or its address was asked for
 * too often in the last day: *retry_after_s > 0 (the seconds to wait); otherwise records it. */
static err_t email_change_allowed_in(db_conn *c, arena *a, const email_change_ask *ask, int64_t now,
                                     int *retry_after_s) {
  db_res *r;
  db_rc rc = db_exec(c, a, &r,
                     "SELECT (SELECT COUNT(*) FROM email_change_requests WHERE account_id = $1 AND role = $2 "
                     "AND created_at > $4), (SELECT MIN(created_at) FROM email_change_requests WHERE account_id = $1 "
                     "AND role = $2 AND created_at > $4), (SELECT COUNT(*) FROM email_change_requests "
                     "WHERE email = $3 AND created_at > $5), (SELECT MIN(created_at) FROM email_change_requests "
                     "WHERE email = $3 AND created_at > $5)",
                     DB_ARGS(DB_TEXT(ask->id), DB_TEXT(role_of[ask->kind]), DB_TEXT(ask->email), DB_INT(now - HOUR_MS),
                             DB_INT(now - DAY_MS)));
  if (rc != DB_OK) return db_to_err(rc);
  int64_t until = 0;
  if (db_int(r, 0, 0) >= EMAIL_CHANGES_PER_HOUR) until = db_int(r, 0, 1) + HOUR_MS;
  if (db_int(r, 0, 2) >= EMAIL_CHANGES_PER_ADDRESS && db_int(r, 0, 3) + DAY_MS > until)
    until = db_int(r, 0, 3) + DAY_MS;
  if (until) {
    *retry_after_s = (int)((until - now + 999) / 1000);
    return ERR_OK;
  }
  char id[ID_LEN + 1];
  id_new(id);
  return db_to_err(
      db_exec(c, NULL, NULL,
              "INSERT INTO email_change_requests (id, account_id, role, email, created_at) "
              "VALUES ($1, $2, $3, $4, $5)",
              DB_ARGS(DB_TEXT(id), DB_TEXT(ask->id), DB_TEXT(role_of[ask->kind]), DB_TEXT(ask->email), DB_INT(now))));
}

auth_outcome auth_store_put_email_change(const email_change_ask *ask, int *retry_after_s) {
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_conn *c;
  *retry_after_s = 0;
  err_t e = db_begin(&c);
  if (!e) e = email_change_allowed_in(c, &a, ask, now, retry_after_s);
  if (!e && *retry_after_s > 0) e = ERR_RATE_LIMITED; /* nothing is written */
  if (!e) e = db_to_err(end_email_change_in(c, ask->kind, ask->id));
  if (!e)
    e = db_to_err(
        db_exec(c, NULL, NULL,
                "INSERT INTO email_changes (token_hash, account_id, role, email, expires_at, created_at, "
                "token_gen, cancel_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                DB_ARGS(DB_TEXT(ask->token_hash), DB_TEXT(ask->id), DB_TEXT(role_of[ask->kind]), DB_TEXT(ask->email),
                        DB_INT(ask->expires_at), DB_INT(now), DB_INT(ask->gen), DB_TEXT(ask->cancel_hash))));
  if (!e) e = db_to_err(mail_enqueue(c, ask->email, ask->to_new_subject, ask->to_new_body));
  if (!e) e = db_to_err(mail_enqueue(c, ask->to_old, ask->to_old_subject, ask->to_old_body));
  e = db_end(c, e);
  arena_fini(&a);
  return *retry_after_s > 0 ? AUTH_TOO_OFTEN : outcome_of(e);
}

/* A live email change of token_hash whose account still has the tokens of its asking (and is
 * not deleted): $1 the hash, $2 now. */
#define LIVE_CHANGE(table)                                                                                             \
  "SELECT c.email FROM email_changes c JOIN " table " a ON a.id = c.account_id AND a.token_gen = c.token_gen "         \
  "AND a.deleted_at IS NULL WHERE c.token_hash = $1 AND c.expires_at > $2"

err_t auth_store_find_email_change(arena *a, const char *token_hash, const char **email, bool *found) {
  return first_cell_of_hash(
      a, LIVE_CHANGE("users") " AND c.role = 'user' UNION ALL " LIVE_CHANGE("providers") " AND c.role = 'provider'",
      token_hash, email, found);
}

err_t auth_store_cancel_email_change(arena *a, const char *cancel_hash, const char **email, bool *cancelled) {
  return first_cell_of_hash(a, "DELETE FROM email_changes WHERE cancel_hash = $1 AND expires_at > $2 RETURNING email",
                            cancel_hash, email, cancelled);
}

auth_outcome auth_store_use_email_change(arena *a, const char *token_hash, const char **email) {
  db_res *r, *old = NULL;
  db_conn *c;
  int64_t now = clock_now_ms();
  bool gone = false;
  err_t e = db_begin_exec(&c, a, &r,
                          "DELETE FROM email_changes WHERE token_hash = $1 AND expires_at > $2 "
                          "RETURNING account_id, role, email, token_gen",
                          DB_ARGS(DB_TEXT(token_hash), DB_INT(now)));
  if (!e && r->rows == 0) gone = true, e = ERR_NOT_FOUND;
  account_kind kind = ACCOUNT_USER;
  if (!e) { /* refused when the account's tokens ended since it was asked for */
    kind = !strcmp(db_text(r, 0, 1), "provider") ? ACCOUNT_PROVIDER : ACCOUNT_USER;
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT email, name FROM %s WHERE id = $1 AND deleted_at IS NULL AND token_gen = $2",
             table_of[kind]);
    e = db_to_err(db_exec(c, a, &old, sql, DB_ARGS(DB_TEXT(db_text(r, 0, 0)), DB_INT(db_int(r, 0, 3)))));
  }
  if (!e && old->rows == 0) gone = true, e = ERR_NOT_FOUND;
  if (!e) {
    char sql[160];
    snprintf(sql, sizeof sql, "UPDATE %s SET email = $2, updated_at = $3 WHERE id = $1", table_of[kind]);
    e = db_to_err(
        db_exec(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(db_text(r, 0, 0)), DB_TEXT(db_text(r, 0, 2)), DB_INT(now))));
  }
  /* ERR_CONFLICT from the unique email (taken since the change was asked for): rolled back,
   * AUTH_EMAIL_TAKEN */
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "DELETE FROM password_reset_tokens WHERE role = $2 AND (account_id = $3 OR email = $1)",
                          DB_ARGS(DB_TEXT(db_text(old, 0, 0)), DB_TEXT(role_of[kind]), DB_TEXT(db_text(r, 0, 0)))));
  if (!e) {
    *email = db_text(r, 0, 2);
    const char *body = arena_printf(a,
                                    "Hello %s,\n\nThe email address of your account was changed to %s. From now on, "
                                    "log in with it.\n\nIf you did not make this change, contact support at once.\n",
                                    db_text(old, 0, 1), *email);
    e = db_to_err(mail_enqueue(c, db_text(old, 0, 0), "Your email address was changed", body));
  }
  e = db_end(c, e);
  return gone ? AUTH_CHANGE_GONE : outcome_of(e);
}

err_t auth_store_end_all(account_kind kind, const char *id) {
  char sql[120];
  snprintf(sql, sizeof sql, "UPDATE %s SET token_gen = token_gen + 1, updated_at = $2 WHERE id = $1", table_of[kind]);
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_INT(clock_now_ms())));
  if (!e) e = db_to_err(end_email_change_in(c, kind, id));
  if (!e) e = db_to_err(auth_store_sessions_end_all_in(c, role_of[kind], id, clock_now_ms()));
  /* every token is logged out: the devices they registered go */
  if (!e) e = db_to_err(notifications_forget_account_devices_in(c, role_of[kind], id));
  if (!e) e = db_to_err(events_tokens_ended_in(c, id, false)); /* its streams end */
  return db_end(c, e);
}

err_t auth_store_prune(int64_t now) {
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL, "DELETE FROM email_changes WHERE expires_at <= $1", DB_ARGS(DB_INT(now)));
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL, "DELETE FROM email_change_requests WHERE created_at <= $1",
                          DB_ARGS(DB_INT(now - DAY_MS))));
  if (!e) /* reset links, a day past their expiry */
    e = db_to_err(db_exec(c, NULL, NULL, "DELETE FROM password_reset_tokens WHERE expires_at <= $1",
                          DB_ARGS(DB_INT(now - DAY_MS))));
  return db_end(c, e);
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const AUTH_EXPORT_SQL[2] = {
    "SELECT email, expires_at FROM email_changes WHERE account_id = $1 AND role = 'user' AND expires_at > $2",
    "SELECT email, expires_at FROM email_changes WHERE account_id = $1 AND role = 'provider' AND expires_at > $2",
};

/* $1 = the account id, $2 = now; [provider]. The reset links go by the account's email (those
 * made before ids were kept have none). */
static const char *const reset_sql[] = {
    "DELETE FROM password_reset_tokens WHERE role = 'user' AND email = (SELECT email FROM users WHERE id = $1)",
    "DELETE FROM password_reset_tokens WHERE role = 'provider' AND email = (SELECT email FROM providers WHERE id = $1)",
};
static const char *const email_change_sql[] = {
    "DELETE FROM email_changes WHERE account_id = $1 AND role = 'user'",
    "DELETE FROM email_changes WHERE account_id = $1 AND role = 'provider'",
};
/* The account's row: erased (it keeps its id for the ledger; its tokens end), or deleted. */
static const char *const row_sql[][2] = {
    [FORGET_ERASE] =
        {"UPDATE users SET email = 'deleted-' || id || '@deleted', password_hash = '!', "
         "token_gen = token_gen + 1, deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL",
         "UPDATE providers SET email = 'deleted-' || id || '@deleted', password_hash = '!', "
         "token_gen = token_gen + 1, deleted_at = $2, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL"},
    [FORGET_DELETE] = {"DELETE FROM users WHERE id = $1", "DELETE FROM providers WHERE id = $1"},
};

err_t auth_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  const char *const sql[] = {reset_sql[who->provider], email_change_sql[who->provider], row_sql[mode][who->provider]};
  int64_t changed;
  err_t e = auth_store_sessions_forget_in(c, who);
  if (!e) e = account_exec_in(c, who, sql, 3, &changed);
  return e ? e : changed ? ERR_OK : ERR_NOT_FOUND;
}

err_t auth_store_admin_exists(const char *email, bool *exists) {
  return db_to_err(db_exists(exists, "SELECT 1 FROM admins WHERE email = $1", DB_ARGS(DB_TEXT(email))));
}

err_t auth_store_insert_admin(const char *email, const char *hash, bool *created) {
  char id[ID_LEN + 1];
  id_new(id);
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r,
                      "INSERT INTO admins (id, email, password_hash, created_at) VALUES ($1, $2, $3, $4) "
                      "ON CONFLICT (email) DO NOTHING RETURNING id",
                      DB_ARGS(DB_TEXT(id), DB_TEXT(email), DB_TEXT(hash), DB_INT(clock_now_ms())));
  *created = rc == DB_OK && r->rows == 1;
  arena_fini(&a);
  return db_to_err(rc);
}

err_t auth_store_upsert_admin(const char *email, const char *hash) {
  char id[ID_LEN + 1];
  id_new(id);
  return db_to_err(db_query(NULL, NULL,
                            "INSERT INTO admins (id, email, password_hash, created_at) VALUES ($1, $2, $3, $4) "
                            "ON CONFLICT (email) DO UPDATE SET password_hash = excluded.password_hash",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(email), DB_TEXT(hash), DB_INT(clock_now_ms()))));
}
