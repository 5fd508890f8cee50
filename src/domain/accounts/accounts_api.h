/* Handlers of the accounts domain, referenced by its route table. Internal to the domain. */
#ifndef DOMAIN_ACCOUNTS_ACCOUNTS_API_H
#define DOMAIN_ACCOUNTS_ACCOUNTS_API_H
#include "http/http.h"

/* accounts_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route accounts_routes[];

/* DELETE /users/me and /providers/me (the caller's role decides which). */
err_t api_accounts_delete(hs_req *req);
/* GET /users/me/export and /providers/me/export. */
err_t api_accounts_export(hs_req *req);

#endif
