/* The list of domains (src/domains.c) and what start-up does with it. */
#ifndef DOMAINS_H
#define DOMAINS_H
#include "domain/domain.h"

/* domains_all, domains_export_in and domains_forget_in, which the domains call, are declared in
 * domain/domain.h. */
/* Builds every domain's rows into the router and gives the OpenAPI document every domain's
 * event kinds (once, at start-up; also for `openapi`). */
void domains_install_routes(void);
/* Registers every domain's background work (handlers and periods) and request hooks, then runs
 * every domain's init, in list order. */
void domains_init(void);
/* Runs every domain's stop, in reverse order. */
void domains_stop(void);

#endif
