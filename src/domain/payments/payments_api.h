/* Handlers of the payments domain, referenced by its route table. */
#ifndef DOMAIN_PAYMENTS_API_H
#define DOMAIN_PAYMENTS_API_H
#include "domain/domain.h"
#include "http/http.h"

/* payments_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route payments_routes[];

err_t api_payments_setup_intent(hs_req *req);
err_t api_payments_save_method(hs_req *req);
err_t api_payments_get_method(hs_req *req);
err_t api_payments_premium_status(hs_req *req);
err_t api_payments_premium_subscribe(hs_req *req);
err_t api_payments_premium_cancel(hs_req *req);
err_t api_webhooks_receive(hs_req *req);
err_t api_payments_refund(hs_req *req);
err_t api_disputes_list(hs_req *req);
err_t api_disputes_evidence(hs_req *req);
/* The webhook's two checks as pure functions (no request, no clock), for the handler and the
 * fuzzer. payments_webhook_check: NULL when header (Stripe-Signature) signs body under secret
 * within 300 s of now_s, else the 400 message. payments_webhook_event: NULL when body is an
 * event with an id, a type and data.object (borrowed from *event, a new reference the caller
 * releases, possibly NULL), else the 400 message. */
const char *payments_webhook_check(const char *secret, const char *header, const char *body, size_t len, int64_t now_s);
const char *payments_webhook_event(const char *body, size_t len, json_t **event, const char **id, const char **type,
                                   json_t **object);

/* The export's payments of a customer (domain_def's export_parts). */
extern const account_part PAYMENTS_EXPORT_PARTS[];

#endif
