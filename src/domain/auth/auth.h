/* Accounts and credentials: registration and login of customers and providers, password
 * reset, and administrator accounts (CLI and bootstrap). */
#ifndef DOMAIN_AUTH_H
#define DOMAIN_AUTH_H
#include "http/http.h"
#include <stdbool.h>

extern const hs_route AUTH_ROUTES[];
extern const size_t AUTH_ROUTES_LEN;

/* Creates the administrator or, when the email exists, sets its password. Hashes on the
 * calling thread. False on failure (logged). */
bool auth_admin_upsert(const char *email, const char *password);

#endif
