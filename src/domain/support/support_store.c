/* Ticket storage. An update is conditional on the status it was decided from, so two staff
 * members moving one ticket at once cannot both win. */
#include "domain/support/support_store.h"
#include "core/clock.h"
#include "core/config.h"
#include "ext/mail.h"

err_t support_store_open(const char *id, const char *account_id, const char *account_role, const char *subject,
                         const char *body, const char *category, const char *mail_subject, const char *mail_body) {
  int64_t now = clock_now_ms();
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e)
    e = db_to_err(db_exec(c, NULL, NULL,
                          "INSERT INTO support_tickets (id, account_id, account_role, subject, body, category, status, "
                          "created_at, updated_at, seq) VALUES ($1, $2, $3, $4, $5, $6, 'OPEN', $7, $7, $8)",
                          DB_ARGS(DB_TEXT(id), DB_TEXT(account_id), DB_TEXT(account_role), DB_TEXT(subject),
                                  DB_TEXT(body), DB_TEXT(category), DB_INT(now), DB_INT(clock_sequence()))));
  if (!e) e = db_to_err(mail_enqueue(c, CFG.support_email, mail_subject, mail_body));
  return db_end(c, e);
}

#define TICKET_SELECT                                                                                                  \
  "SELECT t.*, s.name AS assignee_name, s.email AS assignee_email, COALESCE(u.name, p.name) AS account_name, "         \
  "COALESCE(u.email, p.email) AS account_email FROM support_tickets t "                                                \
  "LEFT JOIN staff s ON s.id = t.assigned_to_id "                                                                      \
  "LEFT JOIN users u ON t.account_role = 'user' AND u.id = t.account_id "                                              \
  "LEFT JOIN providers p ON t.account_role = 'provider' AND p.id = t.account_id "

const db_keyset TICKETS_KEYSET = {"tickets", {{"t.seq", "seq", 'i', false}, {"t.id", "id", 's', false}}};

err_t support_store_list(arena *a, const char *s1, const char *s2, const db_page *pg, db_res **out) {
  db_val args[DB_PAGE_ARGS(2)] = {DB_TEXT(s1), DB_TEXT(s2)};
  return db_page_query(a, pg, TICKET_SELECT "WHERE t.status IN ($1, $2)", args, 2, out) == DB_OK ? ERR_OK
                                                                                                 : ERR_INTERNAL;
}

err_t support_store_get(arena *a, const char *id, db_res **out) {
  return db_query_row(a, out, TICKET_SELECT "WHERE t.id = $1", DB_ARGS(DB_TEXT(id)));
}

err_t support_store_update(const char *id, const char *from, const ticket_update *u, const audit_action *act,
                           bool *moved) {
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e)
    e = db_to_err(
        db_exec(c, &a, &r,
                "UPDATE support_tickets SET status = $3, assigned_to_id = $4, notes = $5, resolved_at = $6, "
                "updated_at = $7 WHERE id = $1 AND status = $2",
                DB_ARGS(DB_TEXT(id), DB_TEXT(from), DB_TEXT(u->status), DB_TEXT(u->assigned_to_id), DB_TEXT(u->notes),
                        u->resolved_at ? DB_INT(u->resolved_at) : DB_NULL, DB_INT(clock_now_ms()))));
  *moved = !e && r->changes == 1;
  if (!e && *moved) e = audit_log_in(c, act);
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

/* ---- the account's part (domain/domain.h) ---- */

const char *const SUPPORT_EXPORT_SQL[2] = {
    "SELECT * FROM support_tickets WHERE account_id = $1 AND account_role = 'user' ORDER BY seq",
    "SELECT * FROM support_tickets WHERE account_id = $1 AND account_role = 'provider' ORDER BY seq",
};

err_t support_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  (void)mode;
  static const char *const sql[] = {"DELETE FROM support_tickets WHERE account_id = $1 AND account_role = 'user'",
                                    "DELETE FROM support_tickets WHERE account_id = $1 AND account_role = 'provider'"};
  return account_exec_in(c, who, &sql[who->provider], 1, NULL);
}
