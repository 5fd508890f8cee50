/* Handlers of the messages domain and its rows. Internal to the domain. */
#ifndef DOMAIN_MESSAGES_MESSAGES_API_H
#define DOMAIN_MESSAGES_MESSAGES_API_H
#include "domain/domain.h"
#include "http/http.h"

/* messages_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route messages_routes[];

err_t api_messages_list(hs_req *req);
err_t api_messages_post(hs_req *req);
err_t api_messages_photo(hs_req *req);
err_t api_messages_read(hs_req *req);
err_t api_messages_threads(hs_req *req);

/* The export's messages, each with its thread (jobId, providerId) (domain_def's export_in). */
err_t messages_export_in(db_conn *c, const account_ref *who, account_export *x);

#endif
