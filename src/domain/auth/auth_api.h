/* Handlers of the auth domain, referenced by its route table. */
#ifndef DOMAIN_AUTH_API_H
#define DOMAIN_AUTH_API_H
#include "http/http.h"

/* auth_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route auth_routes[];

err_t api_auth_register(hs_req *req);
err_t api_auth_login(hs_req *req);
err_t api_auth_provider_register(hs_req *req);
err_t api_auth_provider_login(hs_req *req);
err_t api_auth_forgot_password(hs_req *req);
err_t api_auth_reset_password(hs_req *req);

/* { password }: the rules of every account's password (auth_password_problem). */
extern const hs_schema auth_password_schema;

#endif
