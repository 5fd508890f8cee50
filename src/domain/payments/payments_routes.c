/* Routes and schemas of /payments/..., POST /webhooks, and the test-environment drivers of the
 * job payment operations. */
#include "core/jsonx.h"
#include "core/util.h"
#include "domain/payments/payments.h"
#include "domain/payments/payments_api.h"

static const hs_field method_fields[] = {
    {"paymentMethodId", F_STRING, F_REQUIRED, LEN(1, 255)},
    {0},
};
static const hs_schema method_schema = {method_fields};

/* ---- test drivers: the job flow's payment operations, reachable over HTTP in tests ---- */

static const hs_field test_job_fields[] = {
    {"jobId", F_STRING, F_REQUIRED, LEN(1, 64)},
    {"userId", F_STRING, 0, LEN(1, 64)},
    {"amount", F_NUMBER, 0, RANGE(0, 100000)},
    {0},
};
static const hs_schema test_job_schema = {test_job_fields};

static err_t reply_payments(hs_req *req, const char *job_id) {
  return hs_ok(req, json_pack("{s:o,s:o}", "job", payments_job_json(job_id, "job"), "tip",
                              payments_job_json(job_id, "tip")));
}

err_t api_test_payments_authorize(hs_req *req) {
  const char *job = hs_body_str(req, "jobId");
  err_t e = payments_authorize_job(job, hs_body_str(req, "userId"),
                                   jx_cents(json_number_value(json_object_get(req->body, "amount"))));
  return e == ERR_OK ? reply_payments(req, job) : hs_fail(req, e, e == ERR_UNAVAILABLE ? "Payment processor unavailable" : NULL);
}

err_t api_test_payments_capture(hs_req *req) {
  const char *job = hs_body_str(req, "jobId");
  err_t e = payments_capture_job(job);
  return e == ERR_OK ? reply_payments(req, job) : hs_fail(req, e, e == ERR_UNAVAILABLE ? "Payment processor unavailable" : NULL);
}

err_t api_test_payments_void(hs_req *req) {
  const char *job = hs_body_str(req, "jobId");
  err_t e = payments_void_job(job);
  return e == ERR_OK ? reply_payments(req, job) : hs_fail(req, e, e == ERR_UNAVAILABLE ? "Payment processor unavailable" : NULL);
}

err_t api_test_payments_tip(hs_req *req) {
  const char *job = hs_body_str(req, "jobId");
  char msg[256] = "";
  err_t e = payments_charge_tip(job, hs_body_str(req, "userId"),
                                jx_cents(json_number_value(json_object_get(req->body, "amount"))), msg);
  return e == ERR_OK ? reply_payments(req, job) : hs_fail(req, e, msg[0] ? msg : NULL);
}

err_t api_test_payments_get(hs_req *req) { return reply_payments(req, hs_param(req, "jobId")); }

const hs_route PAYMENTS_ROUTES[] = {
    {HS_POST, "/payments/setup-intent", api_payments_setup_intent, ROLE_USER,
     .flags = ROUTE_SLOW, .summary = "Create a SetupIntent for saving a card (creates the processor customer)"},
    {HS_POST, "/payments/payment-method", api_payments_save_method, ROLE_USER, &method_schema,
     .flags = ROUTE_SLOW, .summary = "Attach and save a payment method"},
    {HS_GET, "/payments/method", api_payments_get_method, ROLE_USER, .flags = ROUTE_SLOW, .summary = "The saved card, or null"},
    {HS_GET, "/payments/premium/status", api_payments_premium_status, ROLE_USER,
     .summary = "Premium subscription status"},
    {HS_POST, "/payments/premium/subscribe", api_payments_premium_subscribe, ROLE_USER,
     .flags = ROUTE_SLOW, .summary = "Start the 9.99/month premium subscription"},
    {HS_POST, "/payments/premium/cancel", api_payments_premium_cancel, ROLE_USER,
     .flags = ROUTE_SLOW, .summary = "Cancel premium at the end of the billing period"},
    {HS_POST, "/webhooks", api_webhooks_receive, ROLE_OPEN, .max_body = 1024 * 1024, .flags = ROUTE_RAW_BODY | ROUTE_SLOW,
     .summary = "Payment processor events (Stripe-Signature verified)"},
    {HS_POST, "/__test/payments/authorize", api_test_payments_authorize, ROLE_OPEN, &test_job_schema,
     .flags = ROUTE_SLOW | ROUTE_TEST_ONLY, .summary = "Drive the job authorization (APP_ENV=test only)"},
    {HS_POST, "/__test/payments/capture", api_test_payments_capture, ROLE_OPEN, &test_job_schema,
     .flags = ROUTE_SLOW | ROUTE_TEST_ONLY, .summary = "Drive the job capture (APP_ENV=test only)"},
    {HS_POST, "/__test/payments/void", api_test_payments_void, ROLE_OPEN, &test_job_schema, .flags = ROUTE_SLOW | ROUTE_TEST_ONLY,
     .summary = "Drive the job void (APP_ENV=test only)"},
    {HS_POST, "/__test/payments/tip", api_test_payments_tip, ROLE_OPEN, &test_job_schema, .flags = ROUTE_SLOW | ROUTE_TEST_ONLY,
     .summary = "Drive a tip charge (APP_ENV=test only)"},
    {HS_GET, "/__test/payments/:jobId", api_test_payments_get, ROLE_OPEN, .flags = ROUTE_TEST_ONLY,
     .summary = "A job's payment records (APP_ENV=test only)"},
};
const size_t PAYMENTS_ROUTES_LEN = ARRAY_LEN(PAYMENTS_ROUTES);
