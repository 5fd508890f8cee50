/* SQL of the notifications domain that its own handlers use (the writes other domains make
 * are in notifications.h: notify_in and friends). Internal to the domain. */
#ifndef DOMAIN_NOTIFICATIONS_STORE_H
#define DOMAIN_NOTIFICATIONS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include <stdbool.h>

/* The account's notifications newest first, by (seq, id); without paging the last 50. */
extern const db_keyset NOTIFICATIONS_KEYSET;
#define NOTIFICATIONS_CAP 50

/* The device device_id of account id (role "user" or "provider") gets push token token,
 * registered in session session_id (it replaces the device's earlier token and session); another
 * device of the account with the same token goes (a token is one device's). */
err_t notifications_store_put_device(const char *role, const char *id, const char *device_id, const char *token,
                                     const char *session_id);
/* Removes the device device_id of the account; *found false when it has none by that id. */
err_t notifications_store_delete_device(const char *role, const char *id, const char *device_id, bool *found);
/* The push tokens of the account's devices (column token), by device id. */
err_t notifications_store_device_tokens(arena *a, const char *role, const char *id, db_res **out);
/* Removes every device whose push token is token (the push service says it is registered no
 * more). */
err_t notifications_store_forget_token(const char *token);
/* The page pg of the account's notifications (only the unread ones with unread). */
err_t notifications_store_list(arena *a, const char *role, const char *id, bool unread, const db_page *pg,
                               db_res **out);
/* Marks every notification of the account read. */
err_t notifications_store_mark_read(const char *role, const char *id);
/* Marks the account's notification notification_id read; *out has its row, or no row when the
 * account has no such notification. */
err_t notifications_store_mark_one_read(arena *a, const char *role, const char *id, const char *notification_id,
                                        db_res **out);
/* Returns and removes the account's pending banner (icon, title, body) in one statement, so two
 * polls never both get it; no row when none is pending. */
err_t notifications_store_take_banner(arena *a, const char *role, const char *id, db_res **out);
/* The same for a stream that opens at outbox position upto: only a banner whose event's position
 * is at most upto (a later one, or one not positioned yet, reaches the stream as an event), or
 * whose event is gone; *out adds that position (NULL: unknown). */
err_t notifications_store_take_banner_upto(arena *a, const char *role, const char *id, int64_t upto, db_res **out);
/* Removes the account's pending banner if it is still the one of event event_id (a stream
 * delivered that event); a newer banner stays. */
err_t notifications_store_clear_banner(const char *role, const char *id, int64_t event_id);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's notifications (account_part's sql), oldest first. */
extern const char *const NOTIFICATIONS_EXPORT_SQL[2];
/* forget_in of the notifications, the banner and the push devices: they go (a deletion of a customer also unlinks the
 * other accounts' notifications about its jobs, which keep their text). */
err_t notifications_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
