/* The customer's own account (GET and PATCH /users/me), saved addresses, the premium features
 * (favorites, provider notes, spend summary, seasonal alerts) and the daily seasonal-alert task. */
#ifndef DOMAIN_USERS_H
#define DOMAIN_USERS_H
#include "domain/domain.h"
#include "http/rowjson.h"

extern const domain_def users_domain;

/* The User JSON of a users row and the UserAddress JSON of a user_addresses row (photos
 * signed), as field tables (http/rowjson.h). */
extern const hs_rj_field USERS_PROFILE_JSON[];
extern const hs_rj_field USERS_ADDRESS_JSON[];

#endif
