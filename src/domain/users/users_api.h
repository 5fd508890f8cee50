/* Handlers of the users domain, referenced by its route table. */
#ifndef DOMAIN_USERS_API_H
#define DOMAIN_USERS_API_H
#include "http/http.h"

err_t api_users_me(hs_req *req);
err_t api_users_update_me(hs_req *req);

#endif
