/* The one route table: every domain's rows, assembled in one place. */
#ifndef ROUTES_H
#define ROUTES_H
#include "http/http.h"

/* Builds the table into the router (once, at start-up). */
void routes_install(void);

#endif
