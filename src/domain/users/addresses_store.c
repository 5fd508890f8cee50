/* Saved addresses' SQL. A free-tier customer keeps one address: the count and the insert
 * happen under the customer's row lock. Photo columns change by compare-and-swap against what
 * the request read, so concurrent photo requests never lose a photo. */
#include "domain/users/addresses_store.h"
#include "core/clock.h"
#include "domain/users/users_store.h"

const db_keyset ADDRESSES_KEYSET = {
    "addresses",
    {{"is_primary", "is_primary", 'i', true}, {"created_at", "created_at", 'i', false}, {"id", "id", 's', false}}};

err_t addresses_store_list(arena *a, const char *user_id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg, "SELECT " ADDRESS_COLUMNS " FROM user_addresses WHERE user_id = $1", user_id, out);
}

err_t addresses_store_get(arena *a, const char *user_id, const char *id, db_res **out) {
  return db_to_err(db_query(a, out, "SELECT " ADDRESS_COLUMNS " FROM user_addresses WHERE id = $1 AND user_id = $2",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(user_id))));
}

users_outcome addresses_store_insert(const char *user_id, const char *id, const char *label, const char *address,
                                     const char *zip) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(users_store_lock_in(c, user_id));
  if (!e)
    e = db_to_err(db_exec(c, &a, &r,
                          "SELECT (SELECT COUNT(*) FROM user_addresses WHERE user_id = $1), "
                          "CASE WHEN " USERS_HAS_PREMIUM " THEN 1 ELSE 0 END FROM users WHERE id = $1",
                          DB_ARGS(DB_TEXT(user_id))));
  users_outcome out = USERS_CHANGED;
  if (!e && r->rows == 0) out = USERS_NO_USER, e = ERR_NOT_FOUND;
  int64_t count = e ? 0 : db_int(r, 0, 0);
  if (!e && count >= 1 && db_int(r, 0, 1) != 1) out = USERS_NEEDS_PREMIUM, e = ERR_CONFLICT; /* rolled back */
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "INSERT INTO user_addresses (id, user_id, label, address, zip, is_primary, created_at, "
                          "updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(user_id), DB_TEXT(label), DB_TEXT(address), DB_TEXT(zip),
                                  DB_BOOL(count == 0), DB_INT(clock_now_ms()))));
  e = db_end(c, e);
  arena_fini(&a);
  return out != USERS_CHANGED ? out : e ? USERS_FAILED : USERS_CHANGED;
}

err_t addresses_store_make_primary(const char *user_id, const char *id) {
  return db_to_err(db_query(
      NULL, NULL, "UPDATE user_addresses SET is_primary = CASE WHEN id = $2 THEN 1 ELSE 0 END WHERE user_id = $1",
      DB_ARGS(DB_TEXT(user_id), DB_TEXT(id))));
}

err_t addresses_store_count(const char *user_id, int64_t *n) {
  arena a;
  arena_init(&a);
  db_res *r;
  err_t e =
      db_to_err(db_query(&a, &r, "SELECT COUNT(*) FROM user_addresses WHERE user_id = $1", DB_ARGS(DB_TEXT(user_id))));
  *n = e ? 0 : db_int(r, 0, 0);
  arena_fini(&a);
  return e;
}

err_t addresses_store_delete(arena *a, const char *user_id, const char *id, db_res **gone) {
  return db_to_err(db_query(a, gone,
                            "DELETE FROM user_addresses WHERE id = $1 AND user_id = $2 AND is_primary = 0 "
                            "RETURNING street_view_photo, service_area_photos",
                            DB_ARGS(DB_TEXT(id), DB_TEXT(user_id))));
}

err_t addresses_store_set_details(const char *id, bool has_driveway, double driveway, bool has_acres, double acres) {
  return db_to_err(
      db_query(NULL, NULL,
               "UPDATE user_addresses SET driveway_length = CASE WHEN $2 = 1 THEN $3 ELSE driveway_length "
               "END, lawn_acres = CASE WHEN $4 = 1 THEN $5 ELSE lawn_acres END, updated_at = $6 WHERE id = $1",
               DB_ARGS(DB_TEXT(id), DB_BOOL(has_driveway), has_driveway ? DB_REAL(driveway) : DB_NULL,
                       DB_BOOL(has_acres), has_acres ? DB_REAL(acres) : DB_NULL, DB_INT(clock_now_ms()))));
}

err_t addresses_store_swap_photos(const db_res *row, const char *street, const char *area_json, bool *moved) {
  arena a;
  arena_init(&a);
  db_res *done;
  err_t e = db_to_err(
      db_query(&a, &done,
               "UPDATE user_addresses SET street_view_photo = $2, service_area_photos = $3, updated_at = $4 "
               "WHERE id = $1 AND COALESCE(street_view_photo, '') = $5 AND service_area_photos = $6 RETURNING id",
               DB_ARGS(DB_TEXT(db_text(row, 0, 0)), DB_TEXT(street), DB_TEXT(area_json), DB_INT(clock_now_ms()),
                       DB_TEXT(db_isnull(row, 0, ADDRESS_STREET_COL) ? "" : db_text(row, 0, ADDRESS_STREET_COL)),
                       DB_TEXT(db_text(row, 0, ADDRESS_AREA_COL)))));
  *moved = !e && done->rows == 0;
  arena_fini(&a);
  return e;
}

err_t addresses_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  (void)mode;
  if (who->provider) return ERR_OK;
  err_t e =
      account_files_in(c, who, "SELECT street_view_photo, service_area_photos FROM user_addresses WHERE user_id = $1");
  static const char *const sql[] = {"DELETE FROM user_addresses WHERE user_id = $1"};
  return e ? e : account_exec_in(c, who, sql, 1, NULL);
}
