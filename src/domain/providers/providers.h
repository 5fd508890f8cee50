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
/* True when the provider has a headshot and both licence sides (allowed to quote). */
bool providers_is_verified(const char *provider_id);
/* The same rule over the columns headshots, id_doc_front and id_doc_back of a providers row,
 * for a caller that read them with other data. */
bool providers_verified_row(const char *headshots, const char *id_doc_front, const char *id_doc_back);

#endif
