/* SQL of support tickets. Internal to the support domain. */
#ifndef DOMAIN_SUPPORT_STORE_H
#define DOMAIN_SUPPORT_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/audit/audit.h"
#include "domain/domain.h"

#define TICKET_LIST_LIMIT 500

/* Opens an OPEN ticket and queues the support inbox's email, in one transaction. */
err_t support_store_open(const char *id, const char *account_id, const char *account_role, const char *subject,
                         const char *body, const char *category, const char *mail_subject, const char *mail_body);
/* The order of the tickets: oldest first, by (seq, id). */
extern const db_keyset TICKETS_KEYSET;
/* The page pg of the tickets whose status is s1 or s2 (unpaged: the first TICKET_LIST_LIMIT),
 * each with the assignee's name and email and the account's name and email. */
err_t support_store_list(arena *a, const char *s1, const char *s2, const db_page *pg, db_res **out);
/* One ticket (same columns); ERR_NOT_FOUND when missing. */
err_t support_store_get(arena *a, const char *id, db_res **out);
/* The new state of a ticket (NULL strings and 0 times are SQL NULL). */
typedef struct ticket_update {
  const char *status, *assigned_to_id, *notes;
  int64_t resolved_at;
} ticket_update;
/* Writes u over the ticket while its status is still `from` and records act, in one
 * transaction; *moved false when the status changed meanwhile (nothing written). */
err_t support_store_update(const char *id, const char *from, const ticket_update *u, const audit_action *act,
                           bool *moved);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's support tickets of the account (account_part's sql), oldest first. */
extern const char *const SUPPORT_EXPORT_SQL[2];
/* forget_in of the account's support tickets (either mode): they go. */
err_t support_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
