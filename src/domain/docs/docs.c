/* The docs domain's declaration (domain/domain.h). */
#include "domain/docs/docs.h"
#include "domain/docs/docs_api.h"

const domain_def docs_domain = {.name = "docs", .routes = docs_routes};
