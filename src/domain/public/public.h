/* The public corner of the API: the service coverage routes (/services/...) and the waitlist
 * sign-up, which the marketing site calls from any origin. */
#ifndef DOMAIN_PUBLIC_H
#define DOMAIN_PUBLIC_H
#include "domain/domain.h"
#include "http/http.h"

extern const domain_def public_domain;

#endif
