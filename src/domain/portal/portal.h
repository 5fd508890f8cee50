/* The staff portal: a browser application (portal/src, TypeScript bundled by esbuild) served
 * at /portal from assets built into the binary. It talks to the API like any client; this
 * domain only serves its page and its two assets, under a strict Content-Security-Policy. */
#ifndef DOMAIN_PORTAL_H
#define DOMAIN_PORTAL_H
#include "domain/domain.h"

extern const domain_def portal_domain;

#endif
