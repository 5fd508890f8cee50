/* Notifications: the persistent history of each customer and provider, pushes to their
 * devices (Expo's format, through the durable queue, to PUSH_URL when set), push-token
 * registration, and the one-shot in-app banner. */
#ifndef DOMAIN_NOTIFICATIONS_H
#define DOMAIN_NOTIFICATIONS_H
#include "db/db.h"
#include "http/http.h"

extern const hs_route NOTIFICATIONS_ROUTES[];
extern const size_t NOTIFICATIONS_ROUTES_LEN;

/* Registers the "push" queue handler. */
void notifications_domain_init(void);
/* Records a notification for account (role "user" or "provider") and queues a push to its
 * device when it registered a token. job_id may be NULL. Failures are logged, not returned:
 * a notification never fails the operation that caused it. */
void notify(const char *account_id, const char *role, const char *title, const char *body, const char *job_id);
/* The same for every provider matching a job's service and ZIP (ASAP jobs). */
void notify_matching_providers(const char *service, const char *zip, const char *title, const char *body,
                               const char *job_id);

#endif
