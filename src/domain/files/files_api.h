/* Handlers of the files domain and its rows. Internal to the domain. */
#ifndef DOMAIN_FILES_API_H
#define DOMAIN_FILES_API_H
#include "http/http.h"

/* files_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route files_routes[];

err_t api_files_get(hs_req *req);

#endif
