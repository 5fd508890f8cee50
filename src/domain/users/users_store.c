/* users table access for the profile routes. */
#include "domain/users/users_store.h"
#include "core/clock.h"

err_t users_store_profile(arena *a, const char *id, db_res **out) {
  if (db_query(a, out,
               "SELECT id, email, name, address, zip, lat, lng, is_premium, premium_since, seasonal_alerts_enabled, "
               "created_at FROM users WHERE id = $1",
               DB_ARGS(DB_TEXT(id))) != DB_OK)
    return ERR_INTERNAL;
  return (*out)->rows ? ERR_OK : ERR_NOT_FOUND;
}

err_t users_store_set_location(const char *id, json_t *patch) {
  json_t *lat = json_object_get(patch, "lat"), *lng = json_object_get(patch, "lng");
  /* CASE keeps a coordinate that the patch does not name */
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r,
                      "UPDATE users SET lat = CASE WHEN $2 = 1 THEN $3 ELSE lat END, "
                      "lng = CASE WHEN $4 = 1 THEN $5 ELSE lng END, updated_at = $6 WHERE id = $1",
                      DB_ARGS(DB_TEXT(id), DB_BOOL(lat), lat ? DB_REAL(json_number_value(lat)) : DB_NULL, DB_BOOL(lng),
                              lng ? DB_REAL(json_number_value(lng)) : DB_NULL, DB_INT(clock_now_ms())));
  err_t e = rc != DB_OK ? ERR_INTERNAL : r->changes == 0 ? ERR_NOT_FOUND : ERR_OK;
  arena_fini(&a);
  return e;
}
