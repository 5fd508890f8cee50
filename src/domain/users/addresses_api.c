/* Saved addresses (/users/me/addresses): the handlers of a part of the users domain (its SQL
 * is in addresses_store.c, its rows in users_routes.c). A customer's first address is primary; a free-tier customer may
 * keep one address (premium lifts the limit); the primary address and the last one cannot be deleted. Another
 * customer's address does not exist for the caller (404). */
#include "core/ids.h"
#include "core/jsonx.h"
#include "domain/common.h"
#include "domain/users/addresses_store.h"
#include "domain/users/users.h"
#include "domain/users/users_api.h"
#include "ext/storage.h"
#include "http/paging.h"
#include "http/rowjson.h"
#include <stdlib.h>
#include <string.h>

const hs_rj_field USERS_ADDRESS_JSON[] = {
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

/* The customer's addresses as the answer: the page GET asks for, every one after a change. */
static err_t reply_list(hs_req *req, bool paged) {
  db_page pg = *DB_PAGE_ALL(&ADDRESSES_KEYSET);
  db_res *r;
  err_t e = paged ? hs_page_begin(req, &ADDRESSES_KEYSET, NULL, 0, &pg) : ERR_OK;
  if (!e) e = addresses_store_list(&req->arena, req->auth.id, &pg, &r);
  if (!e) e = hs_page_end(req, &pg, r);
  return e ? e : hs_ok_rows(req, USERS_ADDRESS_JSON, r, 512);
}

/* The caller's address :id, or 404. */
static err_t load_address(hs_req *req, db_res **r) {
  err_t e = addresses_store_get(&req->arena, req->auth.id, hs_param(req, "id"), r);
  if (e) return e;
  return (*r)->rows ? ERR_OK : hs_not_found(req, "Address");
}

static err_t reply_address(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  return hs_ok_row(req, USERS_ADDRESS_JSON, r);
}

err_t api_addresses_list(hs_req *req) { return reply_list(req, true); }

err_t api_addresses_create(hs_req *req) {
  char id[ID_LEN + 1];
  id_new(id);
  const char *label = hs_body_str(req, "label");
  if (label && strspn(label, " \t\r\n") == strlen(label)) label = NULL; /* blank: the default */
  users_outcome out = addresses_store_insert(req->auth.id, id, label ? label : "Address", hs_body_str(req, "address"),
                                             hs_body_str(req, "zip"));
  if (out != USERS_CHANGED) return users_fail(req, out, "Saving more than one address requires premium");
  return reply_list(req, false);
}

err_t api_addresses_make_primary(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (!e) e = addresses_store_make_primary(req->auth.id, db_text(r, 0, 0));
  return e ? e : reply_list(req, false);
}

static void delete_photo_keys(const char *street, const char *area_json) {
  storage_delete(street);
  json_t *keys = jx_parse_or(area_json, json_array());
  common_delete_stored(keys);
  json_decref(keys);
}

err_t api_addresses_delete(hs_req *req) {
  db_res *r, *gone;
  int64_t count;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  if (db_int(r, 0, ADDRESS_PRIMARY_COL) == 1)
    return hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_INVALID_STATE, "The primary address cannot be deleted");
  if ((e = addresses_store_count(req->auth.id, &count)) != ERR_OK) return e;
  if (count <= 1)
    return hs_fail_code(req, ERR_BAD_REQUEST, ERR_CODE_INVALID_STATE, "The last address cannot be deleted");
  /* the files of the photos the row held when it went, which a concurrent upload may have changed */
  if ((e = addresses_store_delete(&req->arena, req->auth.id, db_text(r, 0, 0), &gone)) != ERR_OK) return e;
  if (gone->rows) delete_photo_keys(db_text(gone, 0, 0), db_text(gone, 0, 1));
  return reply_list(req, false);
}

err_t api_addresses_update(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  if (e != ERR_OK) return e;
  json_t *driveway = json_object_get(req->body, "drivewayLength"), *acres = json_object_get(req->body, "lawnAcres");
  e = addresses_store_set_details(db_text(r, 0, 0), driveway, json_number_value(driveway), acres,
                                  json_number_value(acres));
  return e ? e : reply_address(req);
}

/* Concurrent photo requests on one address each retry their swap this many times. */
#define PHOTO_SWAP_TRIES 20

/* Stores the new photos first, all or none, and records them in one conditional update (read
 * again and retried when another photo request got there first, so no photo is lost); the
 * files this request stored are deleted again when it fails, and the files it replaces only
 * after the update, so the row never points at a missing file. */
err_t api_addresses_add_photos(hs_req *req) {
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
  bool moved = true;
  for (int tries = 0; e == ERR_OK && moved && tries < PHOTO_SWAP_TRIES; tries++) {
    if (tries && (e = load_address(req, &r)) != ERR_OK) break; /* deleted meanwhile: 404 */
    json_t *keys = arena_json(&req->arena, jx_parse_or(db_text(r, 0, ADDRESS_AREA_COL), json_array()));
    json_array_clear(dropped);
    for (size_t i = nstreet ? 1 : 0; i < json_array_size(added); i++) json_array_append(keys, json_array_get(added, i));
    while (json_array_size(keys) > 10) { /* serviceAreaPhotos: 10 at most in all, the oldest go */
      json_array_append(dropped, json_array_get(keys, 0));
      json_array_remove(keys, 0);
    }
    old_street = db_text(r, 0, ADDRESS_STREET_COL);
    char *text = json_dumps(keys, JSON_COMPACT);
    e = addresses_store_swap_photos(r, street_key ? street_key : old_street, text, &moved);
    free(text);
  }
  if (e != ERR_OK || moved) {
    common_delete_stored(added);
    return e != ERR_OK ? e : hs_fail(req, ERR_CONFLICT, "The address's photos are changing; try again");
  }
  common_delete_stored(dropped);
  if (street_key && old_street) storage_delete(old_street);
  return reply_address(req);
}

/* Removes the photos read, conditionally as above, so a photo added meanwhile is never left
 * behind as a file no row names. */
err_t api_addresses_clear_photos(hs_req *req) {
  db_res *r;
  err_t e = load_address(req, &r);
  bool moved = true;
  for (int tries = 0; e == ERR_OK && moved && tries < PHOTO_SWAP_TRIES; tries++) {
    if (tries && (e = load_address(req, &r)) != ERR_OK) break;
    e = addresses_store_swap_photos(r, NULL, "[]", &moved);
  }
  if (e != ERR_OK) return e;
  if (moved) return hs_fail(req, ERR_CONFLICT, "The address's photos are changing; try again");
  delete_photo_keys(db_text(r, 0, ADDRESS_STREET_COL), db_text(r, 0, ADDRESS_AREA_COL));
  return reply_address(req);
}
