/* Support requests and tickets: POST /users/me/support and /providers/me/support email the
 * support inbox and open a SupportTicket in the same transaction; technical_support staff
 * list tickets (GET /staff/tickets) and work them (PATCH /staff/tickets/:id). */
#ifndef DOMAIN_SUPPORT_H
#define DOMAIN_SUPPORT_H
#include "domain/domain.h"
#include "http/http.h"

extern const domain_def support_domain;

#endif
