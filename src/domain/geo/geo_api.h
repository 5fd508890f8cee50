/* Handlers of the geo domain, referenced by its route table. */
#ifndef DOMAIN_GEO_API_H
#define DOMAIN_GEO_API_H
#include "http/http.h"

err_t api_weather(hs_req *req);
err_t api_drive_time(hs_req *req);

#endif
