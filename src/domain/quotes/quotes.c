/* The quotes domain's declaration (domain/domain.h): its routes and its live-update kind. */
#include "domain/quotes/quotes.h"
#include "domain/quotes/quotes_api.h"

static const domain_event events[] = {
    {"quote.created", "Quote", "A quote on the customer's job, or the provider's own"}, {0}};

const domain_def quotes_domain = {.name = "quotes", .routes = quotes_routes, .events = events};
