/* The public corner of the API: the service coverage routes (/services/...) and the waitlist
 * sign-up, which the marketing site calls from any origin. */
#ifndef DOMAIN_PUBLIC_H
#define DOMAIN_PUBLIC_H
#include "http/http.h"

extern const hs_route PUBLIC_ROUTES[];
extern const size_t PUBLIC_ROUTES_LEN;

#endif
