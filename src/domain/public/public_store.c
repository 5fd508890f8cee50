/* SQL of the public routes: coverage from the providers' service ZIPs, and the waitlist. */
#include "domain/public/public_store.h"
#include "core/clock.h"
#include "core/ids.h"
#include "ext/mail.h"

err_t public_store_user_zip(arena *a, const char *user_id, const char **zip) {
  db_res *r;
  db_rc rc = db_query(a, &r, "SELECT zip FROM users WHERE id = $1", DB_ARGS(DB_TEXT(user_id)));
  *zip = rc == DB_OK && r->rows ? db_text(r, 0, 0) : NULL;
  return db_to_err(rc);
}

err_t public_store_coverage(arena *a, const char *zip, db_res **services, int64_t *providers) {
  db_res *n;
  db_rc rc = db_query(a, services,
                      "SELECT DISTINCT s.service FROM provider_services s "
                      "JOIN provider_zips z ON z.provider_id = s.provider_id WHERE z.zip = $1",
                      DB_ARGS(DB_TEXT(zip)));
  if (rc == DB_OK)
    rc = db_query(a, &n, "SELECT COUNT(DISTINCT provider_id) FROM provider_zips WHERE zip = $1", DB_ARGS(DB_TEXT(zip)));
  *providers = rc == DB_OK ? db_int(n, 0, 0) : 0;
  return db_to_err(rc);
}

err_t public_store_waitlist(const waitlist_entry *e, const char *subject, const char *body) {
  char id[ID_LEN + 1];
  id_new(id);
  int64_t now = clock_now_ms();
  db_conn *c;
  err_t err = db_begin(&c);
  if (!err)
    err = db_to_err(db_exec(
        c, NULL, NULL,
        "INSERT INTO waitlist_emails (id, email, name, zip, role, created_at, updated_at) "
        "VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (email) DO UPDATE SET name = excluded.name, "
        "zip = excluded.zip, role = excluded.role, updated_at = excluded.updated_at",
        DB_ARGS(DB_TEXT(id), DB_TEXT(e->email), DB_TEXT(e->name), DB_TEXT(e->zip), DB_TEXT(e->role), DB_INT(now))));
  if (!err) err = db_to_err(mail_enqueue(c, e->email, subject, body));
  return db_end(c, err);
}
