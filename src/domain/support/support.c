/* The support domain's declaration (domain/domain.h): its routes and its part of an account
 * (support tickets). */
#include "domain/support/support.h"
#include "domain/support/support_api.h"
#include "domain/support/support_store.h"

const domain_def support_domain = {.name = "support",
                                   .routes = support_routes,
                                   .export_parts = SUPPORT_EXPORT_PARTS,
                                   .forget_in = support_store_forget_in};
