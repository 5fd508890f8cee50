/* Storage of the token checks and of sessions. A check is one statement, read only; the
 * subject's check is a db_guard (db/db.h), so on PostgreSQL it costs no round trip of its own.
 *
 * A session's refresh token is exchanged by one conditional update (used_at set where it was
 * NULL), so of two requests presenting it one wins and the other finds it used: reuse, which ends
 * the session. Ending a session writes the ids of every access token issued in it into
 * ended_tokens, the table logout writes, so the token check refuses them as it refuses a
 * logged-out token, on every instance, with no claim of the token to look up. */
#include "domain/auth/auth_tokens_store.h"
#include "domain/events/events.h"
#include "domain/notifications/notifications.h"
#include <string.h>

err_t auth_store_subject_exists(token_subject kind, const char *id, const char *role, int64_t gen, const char *token_id,
                                bool at_once, bool *found) {
  /* every kind of token can be logged out (ended_tokens); an erased account's is refused here */
#define NOT_ENDED " AND NOT EXISTS (SELECT 1 FROM ended_tokens WHERE token_id = $4)"
  static const char *const sql[] = {
      [SUBJECT_STAFF] =
          "SELECT 1 FROM staff WHERE id = $1 AND role = $2 AND token_gen = $3 AND disabled_at IS NULL" NOT_ENDED,
      [SUBJECT_ADMIN] = "SELECT 1 FROM admins WHERE id = $1 AND $2 = 'admin' AND $3 = 0" NOT_ENDED,
      [SUBJECT_USER] =
          "SELECT 1 FROM users WHERE id = $1 AND $2 = 'user' AND token_gen = $3 AND deleted_at IS NULL" NOT_ENDED,
      [SUBJECT_PROVIDER] = "SELECT 1 FROM providers WHERE id = $1 AND $2 = 'provider' AND token_gen = $3 "
                           "AND deleted_at IS NULL" NOT_ENDED,
  };
#undef NOT_ENDED
  db_val args[] = {DB_TEXT(id), DB_TEXT(role), DB_INT(gen), DB_TEXT(token_id ? token_id : "")};
  return db_to_err(at_once ? db_exists(found, sql[kind], args, 4) : db_guard(found, sql[kind], args, 4));
}

err_t auth_store_live_elevation(arena *a, const char *elevation_id, const char *target_id, const char *target_role,
                                int64_t active_since, const char **staff_id) {
  db_res *r;
  if (db_query(a, &r,
               "SELECT e.staff_id FROM elevation_requests e JOIN staff s ON s.id = e.staff_id "
               "WHERE e.id = $1 AND e.target_id = $2 AND e.target_role = $3 AND e.status = 'ACTIVE' "
               "AND e.activated_at > $4 AND s.disabled_at IS NULL",
               DB_ARGS(DB_TEXT(elevation_id), DB_TEXT(target_id), DB_TEXT(target_role), DB_INT(active_since))) != DB_OK)
    return ERR_INTERNAL;
  *staff_id = r->rows ? db_text(r, 0, 0) : NULL;
  return ERR_OK;
}

/* ---- sessions ---- */

db_rc auth_store_session_open_in(db_conn *c, const session_row *s, const session_grant *g, int64_t now) {
  db_rc rc = db_exec_later(c, NULL, NULL,
                           "INSERT INTO refresh_families (id, account_id, role, token_gen, created_at, expires_at) "
                           "VALUES ($1, $2, $3, $4, $5, $6)",
                           DB_ARGS(DB_TEXT(s->family_id), DB_TEXT(s->account_id), DB_TEXT(s->role), DB_INT(s->gen),
                                   DB_INT(now), DB_INT(now + SESSION_MAX_MS)));
  if (rc == DB_OK)
    rc = db_exec_later(c, NULL, NULL,
                       "INSERT INTO refresh_tokens (token_hash, family_id, access_token_id, access_expires_at, "
                       "created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                       DB_ARGS(DB_TEXT(g->refresh_hash), DB_TEXT(s->family_id), DB_TEXT(g->access_id),
                               DB_INT(g->access_expires_at), DB_INT(now), DB_INT(now + SESSION_SLIDE_MS)));
  return rc;
}

err_t auth_store_session_open(const session_row *s, const session_grant *g, int64_t now) {
  db_conn *c;
  err_t e = db_begin(&c); /* BEGIN, both rows and the COMMIT go together */
  if (!e) e = db_to_err(auth_store_session_open_in(c, s, g, now));
  return db_end(c, e);
}

db_rc auth_store_session_end_in(db_conn *c, const char *family_id, int64_t now) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r,
                     "UPDATE refresh_families SET ended_at = $2 WHERE id = $1 AND ended_at IS NULL "
                     "RETURNING account_id, role",
                     DB_ARGS(DB_TEXT(family_id), DB_INT(now)));
  if (rc == DB_OK && r->rows == 1) {
    /* the SELECT has its WHERE: SQLite reads the ON CONFLICT as the upsert's, not a join's */
    rc = db_exec(c, NULL, NULL,
                 "INSERT INTO ended_tokens (token_id, expires_at) SELECT access_token_id, access_expires_at "
                 "FROM refresh_tokens WHERE family_id = $1 AND access_expires_at > $2 "
                 "ON CONFLICT (token_id) DO NOTHING",
                 DB_ARGS(DB_TEXT(family_id), DB_INT(now)));
    if (rc == DB_OK) rc = notifications_forget_session_devices_in(c, db_text(r, 0, 1), db_text(r, 0, 0), family_id);
    if (rc == DB_OK) rc = events_tokens_ended_in(c, db_text(r, 0, 0), false); /* its streams end */
  }
  arena_fini(&a);
  return rc;
}

db_rc auth_store_sessions_end_all_in(db_conn *c, const char *role, const char *account_id, int64_t now) {
  return db_exec_later(c, NULL, NULL,
                       "UPDATE refresh_families SET ended_at = $3 WHERE account_id = $1 AND role = $2 "
                       "AND ended_at IS NULL",
                       DB_ARGS(DB_TEXT(account_id), DB_TEXT(role), DB_INT(now)));
}

/* The live session of family_id whose account still has the family's token generation (a
 * password change or reset, logout-all and an erasure move it on): account_id, role, token_gen. */
#define LIVE_FAMILY_SQL                                                                                                \
  "SELECT f.account_id, f.role, f.token_gen, f.expires_at FROM refresh_families f "                                    \
  "WHERE f.id = $1 AND f.ended_at IS NULL AND f.expires_at > $2 AND f.token_gen = CASE f.role "                        \
  "WHEN 'user' THEN (SELECT u.token_gen FROM users u WHERE u.id = f.account_id AND u.deleted_at IS NULL) "             \
  "WHEN 'provider' THEN (SELECT p.token_gen FROM providers p WHERE p.id = f.account_id AND p.deleted_at IS NULL) END"

session_outcome auth_store_session_rotate(arena *a, const char *refresh_hash, const session_grant *g, int64_t now,
                                          session_row *out) {
  db_res *used, *seen = NULL, *fam = NULL;
  db_conn *c;
  session_outcome out_rc = SESSION_INVALID;
  err_t e = db_begin_exec(&c, a, &used,
                          "UPDATE refresh_tokens SET used_at = $2 WHERE token_hash = $1 AND used_at IS NULL "
                          "AND expires_at > $2 RETURNING family_id",
                          DB_ARGS(DB_TEXT(refresh_hash), DB_INT(now)));
  if (!e && used->rows == 0) { /* unknown, expired, or used already: reuse ends its session */
    e = db_to_err(db_exec(c, a, &seen,
                          "SELECT family_id FROM refresh_tokens WHERE token_hash = $1 AND used_at IS NOT NULL",
                          DB_ARGS(DB_TEXT(refresh_hash))));
    if (!e && seen->rows == 1) {
      e = db_to_err(auth_store_session_end_in(c, db_text(seen, 0, 0), now));
      if (!e) out_rc = SESSION_REUSED;
    }
    e = db_end(c, e); /* what reuse ended is committed */
    return e ? SESSION_FAILED : out_rc;
  }
  if (!e) e = db_to_err(db_exec(c, a, &fam, LIVE_FAMILY_SQL, DB_ARGS(DB_TEXT(db_text(used, 0, 0)), DB_INT(now))));
  if (!e && fam->rows == 0) e = ERR_NOT_FOUND; /* ended, past its cap, or its account moved on */
  if (!e) {
    int64_t cap = db_int(fam, 0, 3), expires = now + SESSION_SLIDE_MS < cap ? now + SESSION_SLIDE_MS : cap;
    *out = (session_row){db_text(used, 0, 0), db_text(fam, 0, 0), db_text(fam, 0, 1), db_int(fam, 0, 2)};
    e = db_to_err(db_exec_later(c, NULL, NULL,
                                "INSERT INTO refresh_tokens (token_hash, family_id, access_token_id, "
                                "access_expires_at, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)",
                                DB_ARGS(DB_TEXT(g->refresh_hash), DB_TEXT(out->family_id), DB_TEXT(g->access_id),
                                        DB_INT(g->access_expires_at), DB_INT(now), DB_INT(expires))));
  }
  bool gone = e == ERR_NOT_FOUND;
  e = db_end(c, e);
  return gone ? SESSION_INVALID : e ? SESSION_FAILED : SESSION_ROTATED;
}

err_t auth_store_logout(const char *token_id, int64_t expires_at, const char *session_id, const char *role,
                        const char *account_id) {
  int64_t now = clock_now_ms();
  bool account = role && (!strcmp(role, "user") || !strcmp(role, "provider"));
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL,
                          "INSERT INTO ended_tokens (token_id, expires_at) VALUES ($1, $2) "
                          "ON CONFLICT (token_id) DO NOTHING",
                          DB_ARGS(DB_TEXT(token_id), DB_INT(expires_at)));
  if (!e && session_id) e = db_to_err(auth_store_session_end_in(c, session_id, now));
  /* a token without a session registered its devices under its own id */
  if (!e && account) e = db_to_err(notifications_forget_session_devices_in(c, role, account_id, token_id));
  if (!e) e = db_to_err(events_tokens_ended_in(c, token_id, false)); /* its streams end */
  return db_end(c, e);
}

err_t auth_store_prune_ended(int64_t now) {
  db_conn *c;
  err_t e = db_begin_exec(&c, NULL, NULL, "DELETE FROM ended_tokens WHERE expires_at <= $1", DB_ARGS(DB_INT(now)));
  /* a refresh token past its 30 days, or of a family past its 90, is refused whatever its row
   * says (reuse detection needs no row of it then); the access tokens a family ended are in
   * ended_tokens, not read from the family */
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "DELETE FROM refresh_tokens WHERE expires_at <= $1 OR family_id IN "
                          "(SELECT id FROM refresh_families WHERE expires_at <= $1)",
                          DB_ARGS(DB_INT(now))));
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL, "DELETE FROM refresh_families WHERE expires_at <= $1", DB_ARGS(DB_INT(now))));
  return db_end(c, e);
}

err_t auth_store_sessions_forget_in(db_conn *c, const account_ref *who) {
  static const char *const sql[][2] = {
      {"DELETE FROM refresh_tokens WHERE family_id IN (SELECT id FROM refresh_families WHERE account_id = $1 "
       "AND role = 'user')",
       "DELETE FROM refresh_families WHERE account_id = $1 AND role = 'user'"},
      {"DELETE FROM refresh_tokens WHERE family_id IN (SELECT id FROM refresh_families WHERE account_id = $1 "
       "AND role = 'provider')",
       "DELETE FROM refresh_families WHERE account_id = $1 AND role = 'provider'"},
  };
  return account_exec_in(c, who, sql[who->provider], 2, NULL);
}
