/* SQL for the users table. Internal to the users domain. */
#ifndef DOMAIN_USERS_STORE_H
#define DOMAIN_USERS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <jansson.h>

/* The public profile of user id as JSON (new reference); ERR_NOT_FOUND when missing. */
err_t users_store_profile(arena *a, const char *id, json_t **out);
/* Sets the coordinates present in patch ("lat", "lng"); ERR_NOT_FOUND when missing. */
err_t users_store_set_location(const char *id, json_t *patch);

#endif
