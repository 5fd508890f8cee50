/* The customer's own account (GET and PATCH /users/me), saved addresses, the premium features
 * (favorites, provider notes, spend summary, seasonal alerts) and the daily seasonal-alert task. */
#ifndef DOMAIN_USERS_H
#define DOMAIN_USERS_H
#include "http/http.h"

extern const hs_route USERS_ROUTES[];
extern const size_t USERS_ROUTES_LEN;
/* Saved addresses (addresses.c). */
extern const hs_route ADDRESSES_ROUTES[];
extern const size_t ADDRESSES_ROUTES_LEN;

/* Registers the seasonal-alert queue handlers and their daily periodic task (before
 * queue_start). */
void users_domain_init(void);

#endif
