/* The geo domain's declaration (domain/domain.h). */
#include "domain/geo/geo.h"
#include "domain/geo/geo_api.h"

const domain_def geo_domain = {.name = "geo", .routes = geo_routes};
