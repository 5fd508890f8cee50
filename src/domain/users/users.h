/* The customer's own account: GET and PATCH /users/me. */
#ifndef DOMAIN_USERS_H
#define DOMAIN_USERS_H
#include "http/http.h"

extern const hs_route USERS_ROUTES[];
extern const size_t USERS_ROUTES_LEN;
/* Saved addresses (addresses.c). */
extern const hs_route ADDRESSES_ROUTES[];
extern const size_t ADDRESSES_ROUTES_LEN;

#endif
