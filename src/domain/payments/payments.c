/* The payments domain's declaration (domain/domain.h). */
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"
#include "domain/payments/payments_ops.h"

const domain_def payments_domain = {.name = "payments", .routes = payments_routes, .init = payments_domain_init};
