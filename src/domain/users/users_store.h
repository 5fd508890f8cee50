/* SQL for the users table. Internal to the users domain. */
#ifndef DOMAIN_USERS_STORE_H
#define DOMAIN_USERS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <jansson.h>

/* The profile row of user id (id, email, name, address, zip, lat, lng, is_premium,
 * premium_since, seasonal_alerts_enabled, created_at); ERR_NOT_FOUND when missing. */
err_t users_store_profile(arena *a, const char *id, db_res **out);
/* Sets the coordinates present in patch ("lat", "lng"); ERR_NOT_FOUND when missing. */
err_t users_store_set_location(const char *id, json_t *patch);

#endif
