/* The owner's account as a whole: deleting it (DELETE /users/me, /providers/me) and exporting
 * everything the service holds about it (GET /users/me/export, /providers/me/export). Above
 * the domains whose records an account has; nothing calls it. */
#ifndef DOMAIN_ACCOUNTS_H
#define DOMAIN_ACCOUNTS_H
#include "domain/domain.h"

extern const domain_def accounts_domain;

#endif
