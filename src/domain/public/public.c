/* The public domain's declaration (domain/domain.h). */
#include "domain/public/public.h"
#include "domain/public/public_api.h"

const domain_def public_domain = {.name = "public", .routes = public_routes};
