/* The customer's own account (GET and PATCH /users/me), saved addresses, the premium features
 * (favorites, provider notes, spend summary, seasonal alerts) and the daily seasonal-alert task. */
#ifndef DOMAIN_USERS_H
#define DOMAIN_USERS_H
#include "domain/domain.h"

extern const domain_def users_domain;

#endif
