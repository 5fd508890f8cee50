/* Providers' own profile (/providers/me), its uploads (logo, headshots, licence and insurance
 * documents) and the background recognition of those documents. */
#ifndef DOMAIN_PROVIDERS_H
#define DOMAIN_PROVIDERS_H
#include "domain/domain.h"
#include "http/http.h"
#include <stdbool.h>

extern const domain_def providers_domain;

/* The provider's public profile JSON (URLs signed), or NULL when missing. New reference. */
json_t *providers_profile_json(arena *a, const char *provider_id);

#endif
