/* Handlers of the administrator area, referenced by its route table. */
#ifndef DOMAIN_ADMIN_API_H
#define DOMAIN_ADMIN_API_H
#include "http/http.h"

/* admin_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route admin_routes[];

err_t api_admin_login(hs_req *req);
err_t api_admin_logout(hs_req *req);
err_t api_admin_users(hs_req *req);
err_t api_admin_impersonate(hs_req *req);
err_t api_admin_delete_account(hs_req *req);
err_t api_admin_generate(hs_req *req);
err_t api_admin_notify(hs_req *req);

#endif
