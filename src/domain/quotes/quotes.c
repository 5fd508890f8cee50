/* The quotes domain's declaration (domain/domain.h): its routes, its live-update kind and its
 * part of an account. */
#include "domain/quotes/quotes.h"
#include "domain/quotes/quotes_api.h"
#include "domain/quotes/quotes_store.h"

static const domain_event events[] = {
    {"quote.created", "Quote", "A quote on the customer's job, or the provider's own"}, {0}};

const domain_def quotes_domain = {.name = "quotes",
                                  .routes = quotes_routes,
                                  .events = events,
                                  .export_parts = QUOTES_EXPORT_PARTS,
                                  .forget_in = quotes_store_forget_in};
