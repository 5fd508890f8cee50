/* Handlers of the users domain, referenced by its route table. Internal to the domain. */
#ifndef DOMAIN_USERS_API_H
#define DOMAIN_USERS_API_H
#include "domain/users/users_store.h"
#include "http/http.h"

/* users_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route users_routes[];

err_t api_users_me(hs_req *req);
/* The profiles GET /users/me keeps (SQLite): made at start-up, dropped at shutdown. */
void users_profiles_init(void);
void users_profiles_stop(void);
err_t api_users_update_me(hs_req *req);
/* premium.c */
err_t api_users_favorites(hs_req *req);
err_t api_users_add_favorite(hs_req *req);
err_t api_users_remove_favorite(hs_req *req);
err_t api_users_pro_notes(hs_req *req);
err_t api_users_set_pro_note(hs_req *req);
err_t api_users_delete_pro_note(hs_req *req);
err_t api_users_spend_summary(hs_req *req);
err_t api_users_seasonal_alerts(hs_req *req);
/* The one switch of the domain's outcomes to HTTP, for the failures (each success answers its
 * own way); needs_premium: the 403's message. */
err_t users_fail(hs_req *req, users_outcome out, const char *needs_premium);
/* addresses_api.c */
err_t api_addresses_list(hs_req *req);
err_t api_addresses_create(hs_req *req);
err_t api_addresses_make_primary(hs_req *req);
err_t api_addresses_delete(hs_req *req);
err_t api_addresses_update(hs_req *req);
err_t api_addresses_add_photos(hs_req *req);
err_t api_addresses_clear_photos(hs_req *req);
/* seasonal.c: the daily fan-out of seasonal alerts, and one ZIP's alerts (users.c lists them) */
bool users_seasonal_day(json_t *payload, char err[256]);
bool users_seasonal_zip(json_t *payload, char err[256]);

/* users_api.c: the export's account (with billing and devicePushToken), addresses,
 * favorites, proNotes and seasonalAlerts of a customer (domain_def's export_in) */
err_t users_export_in(db_conn *c, const account_ref *who, account_export *x);

#endif
