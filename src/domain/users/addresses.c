/* Saved addresses (/users/me/addresses): handlers, SQL and routes of a small sub-domain of
 * users. A customer's first address is primary; a free-tier customer may keep one address
 * (premium lifts the limit); the primary address and the last one cannot be deleted.
 * Another customer's address does not exist for the caller (404). */
#include "core/clock.h"
#include "core/ids.h"
#include "core/jsonx.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"
#include "domain/common.h"
#include "domain/users/users.h"
#include "domain/users/users_store.h"
#include "ext/filetype.h"
#include "ext/storage.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

#define MB (1024 * 1024)

static const hs_rj_field ADDRESS[] = {
    {"id", "id", RJ_STR},
    {"label", "label", RJ_STR},
    {"address", "address", RJ_STR},
    {"zip", "zip", RJ_STR},
    {"isPrimary", "is_primary", RJ_BOOL},
    {"drivewayLength", "driveway_length", RJ_REAL},
    {"lawnAcres", "lawn_acres", RJ_REAL},
    {"streetViewPhoto", "street_view_photo", RJ_URL},
    {"serviceAreaPhotos", "service_area_photos", RJ_URLS},
    {"createdAt", "created_at", RJ_ISO},
    {0},
};

#define ADDRESS_COLUMNS                                                                                                \
  "id, label, address, zip, is_primary, driveway_length, lawn_acres, street_view_photo, created_at, "                  \
  "service_area_photos"

static err_t reply_list(hs_req *req) {
  db_res *r;
  if (db_query(&req->arena, &r,
               "SELECT " ADDRESS_COLUMNS
               " FROM user_addresses WHERE user_id = $1 ORDER BY is_primary DESC, created_at, id",
               DB_ARGS(DB_TEXT(req->auth.id))) != DB_OK)
    return ERR_INTERNAL;
  return hs_ok_rows(req, ADDRESS, r, 512);
}

/* The caller's address :id, or 404. */
static err_t load_address(hs_req *req, db_res **r) {
  if (db_query(&req->arena, r, "SELECT " ADDRESS_COLUMNS " FROM user_addresses WHERE id = $1 AND user_id = $2",
               DB_ARGS(DB_TEXT(hs_param(req, "id")), DB_TEXT(req->auth.id))) != DB_OK)
    return ERR_INTERNAL;
  return (*r)->rows ? ERR_OK : hs_fail(req, ERR_NOT_FOUND, "Address not found");
}

static err_t reply_address(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  jw *w = hs_jw(req, 512);
  hs_rj_object(w, hs_rj_bind(&req->arena, ADDRESS, r), r, 0);
  return hs_ok_jw(req, w);
}

static err_t api_addresses_list(hs_req *req) { return reply_list(req); }

static err_t api_addresses_create(hs_req *req) {
  arena *a = &req->arena;
  db_res *r;
  char id[ID_LEN + 1];
  id_new(id);
  const char *label = hs_body_str(req, "label");
  if (label && strspn(label, " \t\r\n") == strlen(label)) label = NULL; /* blank: the default */
  /* the count and the insert share a transaction that first locks the user's row (the whole
   * database on SQLite), so concurrent saves are counted one after another */
  db_conn *c = db_acquire();
  err_t e = ERR_INTERNAL;
  if (db_begin(c) != DB_OK ||
      db_exec(c, NULL, NULL, "UPDATE users SET id = id WHERE id = $1", DB_ARGS(DB_TEXT(req->auth.id))) != DB_OK ||
      db_exec(c, a, &r,
              "SELECT (SELECT COUNT(*) FROM user_addresses WHERE user_id = $1), "
              "CASE WHEN " USERS_HAS_PREMIUM " THEN 1 ELSE 0 END FROM users WHERE id = $1",
              DB_ARGS(DB_TEXT(req->auth.id))) != DB_OK || r->rows == 0)
    goto out;
  int64_t count = db_int(r, 0, 0);
  if (count >= 1 && db_int(r, 0, 1) != 1) {
    e = hs_fail_code(req, ERR_FORBIDDEN, "premium_required", "Saving more than one address requires premium");
    goto out;
  }
  int64_t now = clock_now_ms();
  if (db_exec(c, NULL, NULL,
              "INSERT INTO user_addresses (id, user_id, label, address, zip, is_primary, created_at, updated_at) "
              "VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
              DB_ARGS(DB_TEXT(id), DB_TEXT(req->auth.id), DB_TEXT(label ? label : "Address"),
                      DB_TEXT(hs_body_str(req, "address")), DB_TEXT(hs_body_str(req, "zip")), DB_BOOL(count == 0),
                      DB_INT(now))) != DB_OK ||
      db_commit(c) != DB_OK)
    goto out;
  e = ERR_OK;
out:
  db_release(c);
  return e == ERR_OK ? reply_list(req) : e;
}

static err_t api_addresses_make_primary(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK)
    rc = db_exec(c, NULL, NULL,
                 "UPDATE user_addresses SET is_primary = CASE WHEN id = $2 THEN 1 ELSE 0 END WHERE user_id = $1",
                 DB_ARGS(DB_TEXT(req->auth.id), DB_TEXT(db_text(r, 0, 0))));
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  return rc == DB_OK ? reply_list(req) : ERR_INTERNAL;
}

static void delete_photo_keys(const char *street, const char *area_json) {
  storage_delete(street);
  json_t *keys = jx_parse_or(area_json, json_array());
  common_delete_stored(keys);
  json_decref(keys);
}

static err_t api_addresses_delete(hs_req *req) {
  db_res *r, *count;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  if (db_int(r, 0, 4) == 1) return hs_fail(req, ERR_BAD_REQUEST, "The primary address cannot be deleted");
  if (db_query(&req->arena, &count, "SELECT COUNT(*) FROM user_addresses WHERE user_id = $1",
               DB_ARGS(DB_TEXT(req->auth.id))) != DB_OK)
    return ERR_INTERNAL;
  if (db_int(count, 0, 0) <= 1) return hs_fail(req, ERR_BAD_REQUEST, "The last address cannot be deleted");
  /* the files of the photos the row held when it went, which a concurrent upload may have changed */
  db_res *gone;
  if (db_query(&req->arena, &gone,
               "DELETE FROM user_addresses WHERE id = $1 AND user_id = $2 AND is_primary = 0 "
               "RETURNING street_view_photo, service_area_photos",
               DB_ARGS(DB_TEXT(db_text(r, 0, 0)), DB_TEXT(req->auth.id))) != DB_OK)
    return ERR_INTERNAL;
  if (gone->rows) delete_photo_keys(db_text(gone, 0, 0), db_text(gone, 0, 1));
  return reply_list(req);
}

static err_t api_addresses_update(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  json_t *driveway = json_object_get(req->body, "drivewayLength"), *acres = json_object_get(req->body, "lawnAcres");
  if (db_query(NULL, NULL,
               "UPDATE user_addresses SET driveway_length = CASE WHEN $2 = 1 THEN $3 ELSE driveway_length END, "
               "lawn_acres = CASE WHEN $4 = 1 THEN $5 ELSE lawn_acres END, updated_at = $6 WHERE id = $1",
               DB_ARGS(DB_TEXT(db_text(r, 0, 0)), DB_BOOL(driveway),
                       driveway ? DB_REAL(json_number_value(driveway)) : DB_NULL, DB_BOOL(acres),
                       acres ? DB_REAL(json_number_value(acres)) : DB_NULL, DB_INT(clock_now_ms()))) != DB_OK)
    return ERR_INTERNAL;
  return reply_address(req);
}

/* Writes an address's photo columns only if they still hold what was read in r (a concurrent
 * photo request changes them between our read and our write): *moved tells the caller to read
 * again and recompute. */
static db_rc swap_photos(hs_req *req, const db_res *r, const char *street, const char *area, bool *moved) {
  db_res *done;
  db_rc rc = db_query(&req->arena, &done,
                      "UPDATE user_addresses SET street_view_photo = $2, service_area_photos = $3, updated_at = $4 "
                      "WHERE id = $1 AND COALESCE(street_view_photo, '') = $5 AND service_area_photos = $6 RETURNING id",
                      DB_ARGS(DB_TEXT(db_text(r, 0, 0)), DB_TEXT(street), DB_TEXT(area), DB_INT(clock_now_ms()),
                              DB_TEXT(db_isnull(r, 0, 7) ? "" : db_text(r, 0, 7)), DB_TEXT(db_text(r, 0, 9))));
  *moved = rc == DB_OK && done->rows == 0;
  return rc;
}

/* Concurrent photo requests on one address each retry their swap this many times. */
#define PHOTO_SWAP_TRIES 20

/* Stores the new photos first, all or none, and records them in one conditional update (read
 * again and retried when another photo request got there first, so no photo is lost); the
 * files this request stored are deleted again when it fails, and the files it replaces only
 * after the update, so the row never points at a missing file. */
static err_t api_addresses_add_photos(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  int nstreet, narea;
  hs_upload **street = hs_files(req, "streetViewPhoto", &nstreet), **area = hs_files(req, "serviceAreaPhotos", &narea);
  json_t *added = arena_json(&req->arena, json_array());
  if (!common_store_uploads(street, nstreet, added) || !common_store_uploads(area, narea, added)) {
    common_delete_stored(added);
    return hs_fail(req, ERR_INTERNAL, NULL);
  }
  const char *street_key = nstreet ? json_string_value(json_array_get(added, 0)) : NULL;
  json_t *dropped = arena_json(&req->arena, json_array());
  const char *old_street = NULL;
  db_rc rc = DB_OK;
  bool moved = true;
  for (int tries = 0; rc == DB_OK && moved && tries < PHOTO_SWAP_TRIES; tries++) {
    if (tries && (e = load_address(req, &r)) != ERR_OK) break; /* deleted meanwhile: 404 */
    json_t *keys = arena_json(&req->arena, jx_parse_or(db_text(r, 0, 9), json_array()));
    json_array_clear(dropped);
    for (size_t i = nstreet ? 1 : 0; i < json_array_size(added); i++) json_array_append(keys, json_array_get(added, i));
    while (json_array_size(keys) > 10) { /* serviceAreaPhotos: 10 at most in all, the oldest go */
      json_array_append(dropped, json_array_get(keys, 0));
      json_array_remove(keys, 0);
    }
    old_street = db_text(r, 0, 7);
    char *text = json_dumps(keys, JSON_COMPACT);
    rc = swap_photos(req, r, street_key ? street_key : old_street, text, &moved);
    free(text);
  }
  if (e != ERR_OK || rc != DB_OK || moved) {
    common_delete_stored(added);
    return e != ERR_OK ? e : rc != DB_OK ? ERR_INTERNAL : hs_fail(req, ERR_CONFLICT, "The address's photos are changing; try again");
  }
  common_delete_stored(dropped);
  if (street_key && old_street) storage_delete(old_street);
  return reply_address(req);
}

/* Removes the photos read, conditionally as above, so a photo added meanwhile is never left
 * behind as a file no row names. */
static err_t api_addresses_clear_photos(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  db_rc rc = DB_OK;
  bool moved = true;
  for (int tries = 0; e == ERR_OK && rc == DB_OK && moved && tries < PHOTO_SWAP_TRIES; tries++) {
    if (tries && (e = load_address(req, &r)) != ERR_OK) break;
    rc = swap_photos(req, r, NULL, "[]", &moved);
  }
  if (e != ERR_OK) return e;
  if (rc != DB_OK) return ERR_INTERNAL;
  if (moved) return hs_fail(req, ERR_CONFLICT, "The address's photos are changing; try again");
  delete_photo_keys(db_text(r, 0, 7), db_text(r, 0, 9));
  return reply_address(req);
}

static const hs_field create_fields[] = {
    {"label", F_STRING, 0, LEN(0, 100)},
    {"address", F_STRING, F_REQUIRED, LEN(1, 300)},
    {"zip", F_ZIP, F_REQUIRED},
    {0},
};
static const hs_schema create_schema = {create_fields};
static const hs_field update_fields[] = {
    {"drivewayLength", F_NUMBER, 0, RANGE(0, 1e6)},
    {"lawnAcres", F_NUMBER, 0, RANGE(0, 1e6)},
    {0},
};
static const hs_schema update_schema = {update_fields};
static const hs_file_rule photo_files[] = {
    {"streetViewPhoto", 1, 10 * MB, FT_IMAGES}, {"serviceAreaPhotos", 10, 10 * MB, FT_IMAGES}, {0}};
static const hs_upload_spec photo_upload = {photo_files, 1, "No files uploaded"};

const hs_route ADDRESSES_ROUTES[] = {
    {HS_GET, "/users/me/addresses", api_addresses_list, ROLE_USER, .summary = "Saved addresses, primary first",
     .response = "UserAddress[]"},
    {HS_POST, "/users/me/addresses", api_addresses_create, ROLE_USER, &create_schema, .ok = 201,
     .summary = "Save an address (free tier: one)", .response = "UserAddress[]"},
    {HS_PATCH, "/users/me/addresses/:id/primary", api_addresses_make_primary, ROLE_USER,
     .summary = "Make an address the primary one", .response = "UserAddress[]", .errors = "404"},
    {HS_DELETE, "/users/me/addresses/:id", api_addresses_delete, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Delete a saved address", .response = "UserAddress[]", .errors = "404"},
    {HS_PATCH, "/users/me/addresses/:id", api_addresses_update, ROLE_USER, &update_schema,
     .summary = "Set property details (driveway length, lawn acres)", .response = "UserAddress", .errors = "404"},
    {HS_POST, "/users/me/addresses/:id/photos", api_addresses_add_photos, ROLE_USER, .upload = &photo_upload,
     .summary = "Add street-view and service-area photos", .response = "UserAddress", .errors = "404"},
    {HS_DELETE, "/users/me/addresses/:id/photos", api_addresses_clear_photos, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Remove an address's photos", .response = "UserAddress", .errors = "404"},
};
const size_t ADDRESSES_ROUTES_LEN = ARRAY_LEN(ADDRESSES_ROUTES);
