/* Notifications: the persistent history of each customer and provider, pushes to their
 * devices (Expo's format, through the durable queue, to PUSH_URL when set), push-token
 * registration, and the one-shot in-app banner. */
#ifndef DOMAIN_NOTIFICATIONS_H
#define DOMAIN_NOTIFICATIONS_H
#include "db/db.h"
#include "domain/domain.h"
#include "http/rowjson.h"

extern const domain_def notifications_domain;

/* The Notification JSON of a notifications row, as a field table (http/rowjson.h). */
extern const hs_rj_field NOTIFICATIONS_JSON[];

/* A notification for an account (role "user" or "provider"); job_id may be NULL. */
typedef struct notice {
  const char *account_id, *role, *title, *body, *job_id;
} notice;

/* Records n and queues a push to the account's device when it registered a token, on c and
 * inside the caller's transaction: the notification exists exactly when the change that
 * caused it does. */
db_rc notify_in(db_conn *c, const notice *n);
/* The same when the caller already read the account's push token (NULL: none registered),
 * which saves the statement that looks it up. */
db_rc notify_in_token(db_conn *c, const notice *n, const char *push_token);
/* The same in a transaction of its own. Failures are logged, not returned: a notification
 * never fails the operation that caused it. */
void notify(const char *account_id, const char *role, const char *title, const char *body, const char *job_id);
/* Emails every staff member of role (a staff role: "customer_support", ...) subject and body,
 * on c inside the caller's transaction; SUPPORT_EMAIL when no staff member has the role yet,
 * so the news reaches someone. For what staff must act on (a dispute, money held by a report). */
db_rc notify_staff_in(db_conn *c, const char *role, const char *subject, const char *body);
/* Queues (replaces) the in-app banner of the account (role "user" or "provider"; icon may be
 * NULL), on c inside the caller's transaction, with its live-update event: a stream shows it
 * once, a poll takes it (GODMODE's POST /admin/banner). */
db_rc notifications_put_banner_in(db_conn *c, const char *account_id, const char *role, const char *icon,
                                  const char *title, const char *body);
/* notify_in for every provider matching a job's service and ZIP (ASAP jobs), on c. */
db_rc notify_matching_providers_in(db_conn *c, const char *service, const char *zip, const char *title,
                                   const char *body, const char *job_id);

#endif
