/* Handlers of the events domain and its rows. Internal to the domain. */
#ifndef DOMAIN_EVENTS_API_H
#define DOMAIN_EVENTS_API_H
#include "http/http.h"

/* events_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route events_routes[];

err_t api_events_stream(hs_req *req);
err_t api_events_ticket(hs_req *req);
err_t api_events_session(hs_req *req);
/* The session cookie's name, and the redeem_cookie hook (events.c): a cookie of POST
 * /events/session as its token's claims, while the token has not expired. */
#define EVENTS_SESSION_COOKIE "events_session"
bool events_redeem_session(const char *value, token_claims *out);
/* The redeem_ticket hook (events.c): a ticket of POST /events/ticket, once, as its token's claims. */
bool events_redeem_ticket(const char *ticket, token_claims *out);

#endif
