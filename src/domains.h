/* The list of domains (src/domains.c) and what start-up does with it. */
#ifndef DOMAINS_H
#define DOMAINS_H
#include "domain/domain.h"

/* Every domain, in the order their routes appear in the OpenAPI document; *n receives the
 * count. */
const domain_def *const *domains_all(size_t *n);
/* Builds every domain's rows into the router and gives the OpenAPI document every domain's
 * event kinds (once, at start-up; also for `openapi`). */
void domains_install_routes(void);
/* Registers every domain's background work (handlers and periods) and request hooks, then runs
 * every domain's init, in list order. */
void domains_init(void);
/* Runs every domain's stop, in reverse order. */
void domains_stop(void);

#endif
