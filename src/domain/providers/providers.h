/* Providers' own profile (/providers/me), its uploads (logo, headshots, licence and insurance
 * documents) and the background recognition of those documents. */
#ifndef DOMAIN_PROVIDERS_H
#define DOMAIN_PROVIDERS_H
#include "domain/domain.h"
#include "http/http.h"
#include "http/rowjson.h"
#include <stdbool.h>

extern const domain_def providers_domain;

/* The provider's profile, the Provider JSON of GET /providers/me (URLs signed when written),
 * of a providers row, as a field table (http/rowjson.h). */
extern const hs_rj_field PROVIDERS_PROFILE_JSON[];
/* The provider's row for PROVIDERS_PROFILE_JSON (in a); ERR_NOT_FOUND when missing. */
err_t providers_profile_row(arena *a, const char *provider_id, db_res **row);
/* Whether the provider of row is Preferred Pro now: a cancelled membership is over at its end
 * (premium_ends_at). */
bool providers_premium_now(const db_res *r, int row);

#endif
