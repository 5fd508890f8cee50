/* Routes and schemas of /payments/... and POST /webhooks. */
#include "core/util.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"

static const hs_field method_fields[] = {
    {"paymentMethodId", F_STRING, F_REQUIRED, LEN(1, 255)},
    {0},
};
static const hs_schema method_schema = {method_fields};

const hs_route PAYMENTS_ROUTES[] = {
    {HS_POST, "/payments/setup-intent", api_payments_setup_intent, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Create a SetupIntent for saving a card (creates the processor customer)"},
    {HS_POST, "/payments/payment-method", api_payments_save_method, ROLE_USER, &method_schema, .flags = ROUTE_SLOW,
     .summary = "Attach and save a payment method"},
    {HS_GET, "/payments/method", api_payments_get_method, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "The saved card, or null"},
    {HS_GET, "/payments/premium/status", api_payments_premium_status, ROLE_USER,
     .summary = "Premium subscription status"},
    {HS_POST, "/payments/premium/subscribe", api_payments_premium_subscribe, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Start the 9.99/month premium subscription"},
    {HS_POST, "/payments/premium/cancel", api_payments_premium_cancel, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Cancel premium at the end of the billing period"},
    {HS_POST, "/webhooks", api_webhooks_receive, ROLE_OPEN, .max_body = 1024 * 1024, .flags = ROUTE_RAW_BODY | ROUTE_SLOW,
     .summary = "Payment processor events (Stripe-Signature verified)"},
};
const size_t PAYMENTS_ROUTES_LEN = ARRAY_LEN(PAYMENTS_ROUTES);
