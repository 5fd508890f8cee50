/* Notifications: the persistent history of each customer and provider, pushes to their
 * devices (Expo's format, through the durable queue, to PUSH_URL when set), the devices' push
 * tokens (one per device, each registered in a session), and the one-shot in-app banner. */
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

/* Records n and queues a push to the account's devices when it registered any, on c and inside
 * the caller's transaction: the notification exists exactly when the change that caused it
 * does. The push goes to every device the account has when it is sent. */
db_rc notify_in(db_conn *c, const notice *n);
/* For a caller's read that saves notify_in its look-up: one of the account's push devices (its
 * id), NULL when it has none. account: an SQL expression of the account's id; role: user or
 * provider, as written in SQL. */
#define PUSH_DEVICE_SQL(account, role)                                                                                 \
  "(SELECT MIN(pd.device_id) FROM push_devices pd WHERE pd.account_id = " account " AND pd.role = '" role "')"
/* notify_in when the caller read PUSH_DEVICE_SQL: has_device tells whether it found one. */
db_rc notify_in_known(db_conn *c, const notice *n, bool has_device);
/* The account's (role "user" or "provider") push devices registered in session session_id (a
 * session's family, or a token's own id when it had none) go, on c inside the caller's
 * transaction: logging a token out removes the devices it registered. */
db_rc notifications_forget_session_devices_in(db_conn *c, const char *role, const char *account_id,
                                              const char *session_id);
/* Every push device of the account goes, on c inside the caller's transaction (logout-all). */
db_rc notifications_forget_account_devices_in(db_conn *c, const char *role, const char *account_id);
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
