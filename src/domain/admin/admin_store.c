/* Administrator storage. The deletion cascade runs in one transaction, children before
 * parents, and ends with the audit record; the account's own row goes last, and a row count of
 * 0 there (a concurrent deletion won) rolls everything back. */
#include "domain/admin/admin_store.h"
#include "core/clock.h"
#include "core/util.h"
#include "domain/payments/payments.h"
#include <string.h>

static err_t rows(arena *a, db_res **out, const char *sql, const db_val *params, int n) {
  return db_query(a, out, sql, params, n) == DB_OK ? ERR_OK : ERR_INTERNAL;
}

err_t admin_store_find_email(arena *a, const char *email, db_res **out) {
  return rows(a, out, "SELECT id, email, password_hash FROM admins WHERE email = $1", DB_ARGS(DB_TEXT(email)));
}

err_t admin_store_users(arena *a, int limit, db_res **out) {
  return rows(a, out,
              "SELECT id, email, name, address, zip, lat, lng, is_premium, premium_since, processor_customer_id, "
              "created_at FROM users "
              "ORDER BY created_at DESC, id LIMIT $1",
              DB_ARGS(DB_INT(limit)));
}

err_t admin_store_providers(arena *a, int limit, db_res **out) {
  return rows(a, out,
              "SELECT id, email, name, phone, company_name, services, service_zips, is_premium, created_at "
              "FROM providers ORDER BY created_at DESC, id LIMIT $1",
              DB_ARGS(DB_INT(limit)));
}

err_t admin_store_put_banner(const char *account_id, const char *role, const char *icon, const char *title,
                             const char *body, const audit_action *act) {
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK)
    rc =
        db_exec(c, NULL, NULL,
                "INSERT INTO banners (account_id, role, icon, title, body, created_at) VALUES ($1, $2, $3, $4, $5, $6) "
                "ON CONFLICT (account_id, role) DO UPDATE SET icon = excluded.icon, title = excluded.title, "
                "body = excluded.body, created_at = excluded.created_at",
                DB_ARGS(DB_TEXT(account_id), DB_TEXT(role), DB_TEXT(icon), DB_TEXT(title), DB_TEXT(body),
                        DB_INT(clock_now_ms())));
  if (rc == DB_OK) rc = staff_audit_in(c, act);
  if (rc == DB_OK) rc = db_commit(c);
  db_release(c);
  return db_to_err(rc);
}

err_t admin_store_authorized_jobs(arena *a, const char *id, db_res **out) {
  return rows(a, out,
              "SELECT j.id FROM jobs j JOIN payments p ON p.job_id = j.id AND p.kind = 'job' "
              "AND p.released_at IS NULL WHERE j.customer_id = $1 AND p.status = 'AUTHORIZED'",
              DB_ARGS(DB_TEXT(id)));
}

err_t admin_store_account_files(arena *a, const char *role, const char *id, db_res *out[3]) {
  static const char *const provider_sql[] = {
      "SELECT logo_url, headshots, id_doc_front, id_doc_back, ins_doc_url FROM providers WHERE id = $1",
      "SELECT before_images, after_images FROM jobs WHERE provider_id = $1 AND status <> 'CANCELLED'",
      "SELECT content FROM messages WHERE provider_id = $1 AND content LIKE '[IMAGE]%'",
  };
  static const char *const user_sql[] = {
      "SELECT street_view_photo, service_area_photos FROM user_addresses WHERE user_id = $1",
      "SELECT images, before_images, after_images FROM jobs WHERE customer_id = $1",
      ("SELECT m.content FROM messages m JOIN jobs j ON j.id = m.job_id WHERE j.customer_id = $1 "
       "AND m.content LIKE '[IMAGE]%'"),
  };
  const char *const *sql = !strcmp(role, "provider") ? provider_sql : user_sql;
  for (int i = 0; i < 3; i++)
    if (rows(a, &out[i], sql[i], DB_ARGS(DB_TEXT(id))) != ERR_OK) return ERR_INTERNAL;
  return ERR_OK;
}

/* Statements with $1 = the account id and $2 = now, in order; the last deletes the account. */
static const char *const delete_user_sql[] = {
    /* other accounts' notifications about the customer's jobs keep their text, not the link */
    ("UPDATE notifications SET job_id = NULL WHERE job_id IN (SELECT id FROM jobs WHERE customer_id = $1) "
     "AND NOT (account_id = $1 AND role = 'user')"),
    "DELETE FROM reviews WHERE customer_id = $1 OR job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
    "DELETE FROM messages WHERE job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
    "DELETE FROM quotes WHERE job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
    "DELETE FROM payments WHERE user_id = $1 OR job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
    "DELETE FROM job_reports WHERE customer_id = $1 OR job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
    "DELETE FROM recurring_requests WHERE customer_id = $1 OR job_id IN (SELECT id FROM jobs WHERE customer_id = $1)",
    "DELETE FROM jobs WHERE customer_id = $1",
    "DELETE FROM user_addresses WHERE user_id = $1",
    "DELETE FROM favorites WHERE user_id = $1",
    "DELETE FROM pro_notes WHERE user_id = $1",
    "DELETE FROM seasonal_alerts WHERE user_id = $1",
    "DELETE FROM notifications WHERE account_id = $1 AND role = 'user'",
    "DELETE FROM banners WHERE account_id = $1 AND role = 'user'",
    "DELETE FROM support_tickets WHERE account_id = $1 AND account_role = 'user'",
    "DELETE FROM password_reset_tokens WHERE role = 'user' AND email = (SELECT email FROM users WHERE id = $1)",
    "DELETE FROM users WHERE id = $1",
};

static const char *const delete_provider_sql[] = {
    /* jobs only this provider quoted are open again without quotes */
    "UPDATE jobs SET status = 'PENDING', updated_at = $2 WHERE status = 'QUOTED' AND provider_id IS NULL "
    "AND id IN (SELECT job_id FROM quotes WHERE provider_id = $1) "
    "AND NOT EXISTS (SELECT 1 FROM quotes q WHERE q.job_id = jobs.id AND q.provider_id <> $1)",
    "UPDATE jobs SET status = 'PENDING', provider_id = NULL, accepted_at = NULL, completed_at = NULL, "
    "eta_minutes = NULL, before_images = '[]', after_images = '[]', updated_at = $2 "
    "WHERE provider_id = $1 AND status <> 'CANCELLED'",
    "UPDATE jobs SET provider_id = NULL, updated_at = $2 WHERE provider_id = $1",
    "DELETE FROM quotes WHERE provider_id = $1",
    "DELETE FROM reviews WHERE provider_id = $1",
    "DELETE FROM messages WHERE provider_id = $1",
    "DELETE FROM recurring_requests WHERE provider_id = $1",
    /* customers' favorites of it and private notes about it */
    "DELETE FROM favorites WHERE provider_id = $1",
    "DELETE FROM pro_notes WHERE provider_id = $1",
    "DELETE FROM notifications WHERE account_id = $1 AND role = 'provider'",
    "DELETE FROM banners WHERE account_id = $1 AND role = 'provider'",
    "DELETE FROM support_tickets WHERE account_id = $1 AND account_role = 'provider'",
    "DELETE FROM password_reset_tokens WHERE role = 'provider' AND email = (SELECT email FROM providers WHERE id = $1)",
    "DELETE FROM provider_services WHERE provider_id = $1",
    "DELETE FROM provider_zips WHERE provider_id = $1",
    "DELETE FROM providers WHERE id = $1",
};

err_t admin_store_delete_account(const char *role, const char *id, const audit_action *act) {
  bool provider = !strcmp(role, "provider");
  const char *const *sql = provider ? delete_provider_sql : delete_user_sql;
  size_t n = provider ? ARRAY_LEN(delete_provider_sql) : ARRAY_LEN(delete_user_sql);
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  err_t e = ERR_OK;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  /* the payments of the jobs it is released from move to their history: money given back after
     the commit, and the next acceptance authorizes afresh */
  if (rc == DB_OK && provider) rc = payments_release_provider_jobs_in(c, id);
  for (size_t i = 0; rc == DB_OK && i < n; i++) {
    bool with_now = strstr(sql[i], "$2") != NULL;
    db_val args[] = {DB_TEXT(id), DB_INT(now)};
    rc = db_exec(c, &a, &r, sql[i], args, with_now ? 2 : 1);
  }
  if (rc == DB_OK && r->changes == 0) e = ERR_NOT_FOUND;
  if (rc == DB_OK && e == ERR_OK) rc = staff_audit_in(c, act);
  if (rc == DB_OK && e == ERR_OK) rc = db_commit(c);
  db_release(c); /* rolls back what is not committed */
  arena_fini(&a);
  return e != ERR_OK ? e : db_to_err(rc);
}
