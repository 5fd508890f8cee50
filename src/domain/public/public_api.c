/* Handlers of /services/... and /waitlist. */
#include "domain/public/public_api.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/common.h"
#include "domain/public/public_store.h"
#include <string.h>

/* The services offered in zip (rows), and the number of providers. */
static err_t coverage(hs_req *req, const char *zip, db_res **services, int64_t *providers) {
  return public_store_coverage(&req->arena, zip, services, providers);
}

err_t api_services_available(hs_req *req) {
  const char *zip;
  err_t e = public_store_user_zip(&req->arena, req->auth.id, &zip);
  if (e != ERR_OK) return e;
  if (!zip) return hs_not_found(req, "User");
  db_res *r;
  int64_t providers;
  if ((e = coverage(req, zip, &r, &providers)) != ERR_OK) return e;
  jw *w = hs_jw(req, 256);
  jw_obj(w);
  jw_key(w, "services"); /* in the specification's order */
  jw_arr(w);
  for (int k = 0; SERVICE_NAMES[k]; k++)
    for (int i = 0; i < r->rows; i++)
      if (!strcmp(db_text(r, i, 0), SERVICE_NAMES[k])) jw_str(w, SERVICE_NAMES[k]);
  jw_arr_end(w);
  jw_key(w, "providerCount");
  jw_int(w, providers);
  jw_key_str(w, "zip", zip);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

err_t api_services_check_zip(hs_req *req) {
  const char *zip = json_string_value(json_object_get(req->query, "zip"));
  db_res *r;
  int64_t providers;
  err_t e = coverage(req, zip, &r, &providers);
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b,s:s}", "covered", providers > 0, "zip", zip);
}

err_t api_waitlist_join(hs_req *req) {
  waitlist_entry w = {hs_body_str(req, "name"), hs_body_str(req, "email"), hs_body_str(req, "zip"),
                      hs_body_str(req, "role")};
  const char *body = arena_printf(&req->arena,
                                  "Hi %s,\n\nthanks for joining the waitlist. We will write to you at this address "
                                  "as soon as we serve ZIP %s.\n",
                                  w.name, w.zip);
  err_t e = public_store_waitlist(&w, "You are on the waitlist", body);
  if (e != ERR_OK) return e;
  return hs_ok_pack(req, "{s:b}", "ok", 1);
}
