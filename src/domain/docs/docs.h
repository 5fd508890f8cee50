/* The API's own documentation: GET /openapi.json (generated from the route table), GET /docs
 * (Redoc's reference page) and the Redoc bundle it loads from this server. */
#ifndef DOMAIN_DOCS_H
#define DOMAIN_DOCS_H
#include "domain/domain.h"

extern const domain_def docs_domain;

#endif
