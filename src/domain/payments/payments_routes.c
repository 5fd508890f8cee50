/* Routes and schemas of /payments/..., POST /webhooks, and the staff's refunds and disputes. */
#include "core/util.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"
#include "http/paging.h"

static const hs_field method_fields[] = {
    {"paymentMethodId", F_STRING, F_REQUIRED, LEN(1, 255)},
    {0},
};
static const hs_schema method_schema = {method_fields};

/* amount: at most the largest total a quote can have (100000 and its fee); the handler holds it
 * to what is left of the payment. target: the job's payment (default), its tip, or all of both;
 * providerShare: who bears it (prorata, the default: the provider's transfer gives back its
 * share; none: the platform alone) */
static const char *const REFUND_TARGETS[] = {"job", "tip", "all", NULL};
static const char *const PROVIDER_SHARES[] = {"prorata", "none", NULL};
static const hs_field refund_fields[] = {
    {"amount", F_NUMBER, 0, RANGE(0.01, 118000)},
    {"reason", F_STRING, F_REQUIRED, LEN(1, 500)},
    {"target", F_ENUM, 0, .choices = REFUND_TARGETS},
    {"providerShare", F_ENUM, 0, .choices = PROVIDER_SHARES},
    {0},
};
static const hs_schema refund_schema = {refund_fields};

static const char *const DISPUTE_LISTS[] = {"open", "closed", NULL};
static const hs_field disputes_query_fields[] = {{"status", F_ENUM, 0, .choices = DISPUTE_LISTS}, HS_PAGE_FIELDS, {0}};
static const hs_schema disputes_query = {disputes_query_fields};

/* text: Stripe's uncategorized_text holds 20,000 characters; files: the job's photos, at most
 * PHOTOBOOK_MAX_PHOTOS of each kind (the job's, its threads') */
static const hs_field file_id_item = {"fileIds", F_STRING, 0, LEN(1, 64)};
static const hs_field evidence_fields[] = {
    {"text", F_STRING, F_REQUIRED, LEN(1, 20000)},
    {"fileIds", F_ARRAY, 0, LEN(0, 20), .item = &file_id_item},
    {0},
};
static const hs_schema evidence_schema = {evidence_fields};

/* Each calls the payment processor, whose rate limit is the platform's: per account. */
static const hs_rate_limit setup_intent_limit = {"setup-intent", 10, 60 * 60 * 1000, .per_account = true};
static const hs_rate_limit payment_method_limit = {"payment-method", 10, 60 * 60 * 1000, .per_account = true};
static const hs_rate_limit subscribe_limit = {"premium-subscribe", 5, 60 * 60 * 1000, .per_account = true};

const hs_route payments_routes[] = {
    {HS_POST, "/payments/setup-intent", api_payments_setup_intent, ROLE_USER, .flags = ROUTE_SLOW,
     .limit = &setup_intent_limit, .summary = "Create a SetupIntent for saving a card (creates the processor customer)",
     .response = "SetupIntent", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/payments/payment-method", api_payments_save_method, ROLE_USER, &method_schema, .flags = ROUTE_SLOW,
     .limit = &payment_method_limit, .summary = "Attach and save a payment method", .response = "Card",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/payments/method", api_payments_get_method, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "The saved card, or null", .response = "Card?", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/payments/premium/status", api_payments_premium_status, ROLE_USER, .flags = ROUTE_DB_READ,
     .summary = "Premium subscription status", .response = "PremiumStatus", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/payments/premium/subscribe", api_payments_premium_subscribe, ROLE_USER, .flags = ROUTE_SLOW,
     .limit = &subscribe_limit, .summary = "Start the 9.99/month premium subscription",
     .response = "PremiumSubscription", .errors = ERRORS(ERR_PAYMENT_REQUIRED, ERR_NOT_FOUND)},
    {HS_POST, "/payments/premium/cancel", api_payments_premium_cancel, ROLE_USER, .flags = ROUTE_SLOW,
     .summary = "Cancel premium at the end of the billing period", .response = "PremiumCancellation",
     .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/webhooks", api_webhooks_receive, ROLE_OPEN, .max_body = 1024 * 1024,
     .flags = ROUTE_RAW_BODY | ROUTE_SLOW, .summary = "Payment processor events (Stripe-Signature verified)",
     .response = "WebhookReceipt"},
    {HS_POST, "/staff/payments/:jobId/refund", api_payments_refund, ROLE_CUSTOMER_SUPPORT, &refund_schema,
     .flags = ROUTE_SLOW,
     .summary = "Refund a job's captured payment or tip, in part or in full, saying who bears it (customer support)",
     .response = "RefundResult", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {HS_GET, "/staff/disputes", api_disputes_list, ROLE_CUSTOMER_SUPPORT, .query = &disputes_query,
     .summary = "Disputes (chargebacks) with their job, parties, deadline and the photos evidence may use",
     .response = "Dispute[]"},
    {HS_POST, "/staff/disputes/:id/evidence", api_disputes_evidence, ROLE_CUSTOMER_SUPPORT, &evidence_schema,
     .flags = ROUTE_SLOW, .max_body = 128 * 1024,
     .summary = "Answer a dispute at the payment processor with text and the job's photos (final)",
     .response = "Dispute", .errors = ERRORS(ERR_NOT_FOUND, ERR_CONFLICT)},
    {0},
};
