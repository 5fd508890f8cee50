/* GODMODE: the development-only administrator area (/admin/...): login, every account,
 * impersonation, account deletion with its cascade, bulk data generation and in-app banners.
 * Every route is flagged ROUTE_DEV_ONLY, so APP_ENV=production answers 404. */
#ifndef DOMAIN_ADMIN_H
#define DOMAIN_ADMIN_H
#include "domain/domain.h"
#include "http/http.h"

extern const domain_def admin_domain;

#endif
