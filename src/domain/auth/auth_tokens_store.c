/* Storage of the token checks: one statement per check, read only. The subject's check is a
 * db_guard (db/db.h), so on PostgreSQL it costs no round trip of its own. */
#include "domain/auth/auth_tokens_store.h"

err_t auth_store_subject_exists(token_subject kind, const char *id, const char *role, int64_t gen, const char *token_id,
                                bool *found) {
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
  return db_to_err(db_guard(found, sql[kind], args, 4));
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
