/* The quotes domain's declaration (domain/domain.h). */
#include "domain/quotes/quotes.h"
#include "domain/quotes/quotes_api.h"

const domain_def quotes_domain = {.name = "quotes", .routes = quotes_routes};
