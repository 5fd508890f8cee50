/* Handlers and shared internals of the payouts domain. Internal. */
#ifndef DOMAIN_PAYOUTS_API_H
#define DOMAIN_PAYOUTS_API_H
#include "domain/domain.h"
#include "ext/payments.h"
#include "http/http.h"

/* payouts_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route payouts_routes[];

err_t api_payouts_account_create(hs_req *req);
err_t api_payouts_account_get(hs_req *req);
err_t api_payouts_list(hs_req *req);
err_t api_payouts_onboarding_page(hs_req *req);
/* The server's own pages of the onboarding's return and refresh addresses (domain/links.h). */
err_t api_payouts_app_return_page(hs_req *req);
err_t api_payouts_app_refresh_page(hs_req *req);

/* payouts_transfers.c: the service's name of an account's state (pending, enabled,
 * restricted), and recording it (its provider's transfers follow). */
const char *payouts_account_status(const pay_account *acc);
err_t payouts_record_account(arena *a, const pay_account *acc);
/* The background work of payouts (payouts.c lists it; payouts_transfers.c): a transfer made,
 * reversed, a provider's transfers followed, and every 10 minutes the transfers due. */
#define PO_DUE_PERIOD_MS (10LL * 60 * 1000)
/* (each a queue handler) */
bool po_transfer_from_queue(json_t *payload, char err[256]);
bool po_reverse_from_queue(json_t *payload, char err[256]);
bool po_provider_from_queue(json_t *payload, char err[256]);
bool po_due_from_queue(json_t *payload, char err[256]);

/* The export's payoutAccount and transfers of a provider (domain_def's export_parts). */
extern const account_part PAYOUTS_EXPORT_PARTS[];

#endif
