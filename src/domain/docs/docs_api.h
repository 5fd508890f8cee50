/* Handlers of the docs domain and its rows. Internal to the domain. */
#ifndef DOMAIN_DOCS_API_H
#define DOMAIN_DOCS_API_H
#include "http/http.h"

/* docs_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route docs_routes[];

err_t api_openapi(hs_req *req);
err_t api_docs(hs_req *req);
err_t api_docs_script(hs_req *req);

#endif
