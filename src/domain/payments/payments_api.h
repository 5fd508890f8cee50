/* Handlers of the payments domain, referenced by its route table. */
#ifndef DOMAIN_PAYMENTS_API_H
#define DOMAIN_PAYMENTS_API_H
#include "http/http.h"

err_t api_payments_setup_intent(hs_req *req);
err_t api_payments_save_method(hs_req *req);
err_t api_payments_get_method(hs_req *req);
err_t api_payments_premium_status(hs_req *req);
err_t api_payments_premium_subscribe(hs_req *req);
err_t api_payments_premium_cancel(hs_req *req);
err_t api_webhooks_receive(hs_req *req);

#endif
