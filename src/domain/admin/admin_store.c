/* Administrator storage. The deletion runs in one transaction, every domain's part of the
 * account (domain/domain.h: forget_in, FORGET_DELETE), the rows naming others' first, and ends
 * with the audit record; the account's own row goes last, and a row count of 0 there (a
 * concurrent deletion won) rolls everything back. */
#include "domain/admin/admin_store.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/util.h"
#include "domain/auth/auth.h"
#include "domain/common.h"
#include "domain/jobs/jobs.h"
#include "domain/notifications/notifications.h"
#include "ext/geo.h"
#include <stdlib.h>
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
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = db_to_err(notifications_put_banner_in(c, account_id, role, icon, title, body));
  if (!e) e = audit_log_in(c, act);
  return db_end(c, e);
}

err_t admin_store_authorized_jobs(arena *a, const char *id, db_res **out) {
  /* from the customer's jobs (CROSS JOIN: SQLite's order), not from every AUTHORIZED payment */
  return rows(a, out,
              "SELECT j.id FROM jobs j CROSS JOIN payments p WHERE p.job_id = j.id AND p.kind = 'job' "
              "AND p.released_at IS NULL AND j.customer_id = $1 AND p.status = 'AUTHORIZED'",
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

err_t admin_store_delete_account(const char *role, const char *id, const audit_action *act) {
  bool provider = !strcmp(role, "provider");
  const account_ref who = {id, provider ? "provider" : "user", provider, clock_now_ms(), NULL};
  db_conn *c;
  err_t e = db_begin(&c);
  if (!e) e = domains_forget_in(c, &who, FORGET_DELETE);
  if (!e) e = audit_log_in(c, act);
  return db_end(c, e);
}

/* ---- generated data ---- */

/* Manhattan ZIPs of the embedded table, close to one another, so generated providers match
 * generated jobs (10001, the test harness's default ZIP, is left out). */
static const char *const GENERATED_ZIPS[] = {"10002", "10003", "10011", "10012", "10013",
                                             "10014", "10016", "10017", "10018", "10019"};
#define NZIPS ((int)ARRAY_LEN(GENERATED_ZIPS))

err_t admin_store_generate_customers(arena *a, const admin_generation *g, int from, int to, int *jobs) {
  int64_t now = clock_now_ms();
  int made = 0;
  db_conn *c;
  err_t e = db_begin(&c);
  for (int i = from; !e && i < to; i++) {
    char id[ID_LEN + 1];
    id_new(id);
    const char *zip = GENERATED_ZIPS[i % NZIPS];
    const char *address = arena_printf(a, "%d Generated Street", i + 1);
    e = db_to_err(auth_insert_user_in(c, id, arena_printf(a, "gen-%s-c%d@example.com", g->tag, i + 1), g->hash,
                                      arena_printf(a, "Generated Customer %d", i + 1), address, zip));
    for (int k = 0; !e && k < g->per_customer; k++) {
      char job_id[ID_LEN + 1];
      id_new(job_id);
      job_new j = {.id = job_id,
                   .customer_id = id,
                   .service = SERVICE_NAMES[(i + k) % 4],
                   .description = arena_printf(a, "Generated request %d", k + 1),
                   .address = address,
                   .zip = zip,
                   .preferred_at = (now / DAY_MS + k + 1) * DAY_MS + 9 * HOUR_MS,
                   .has_preferred = true};
      j.has_coords = geo_zip_centroid(zip, &j.lat, &j.lng);
      e = db_to_err(jobs_insert_in(c, &j, NULL, NULL));
      made++;
    }
  }
  e = db_end(c, e);
  if (!e) *jobs += made;
  return e;
}

err_t admin_store_generate_providers(arena *a, const admin_generation *g, int from, int to) {
  db_conn *c;
  err_t e = db_begin(&c);
  for (int i = from; !e && i < to; i++) {
    char id[ID_LEN + 1];
    id_new(id);
    json_t *services = json_pack("[s,s]", SERVICE_NAMES[i % 4], SERVICE_NAMES[(i + 1) % 4]);
    json_t *zips = json_pack("[s,s,s]", GENERATED_ZIPS[i % NZIPS], GENERATED_ZIPS[(i + 1) % NZIPS],
                             GENERATED_ZIPS[(i + 2) % NZIPS]);
    e = db_to_err(auth_insert_provider_in(c, id, arena_printf(a, "gen-%s-p%d@example.com", g->tag, i + 1), g->hash,
                                          arena_printf(a, "Generated Pro %d", i + 1), NULL, services, zips));
    json_decref(services), json_decref(zips);
  }
  return db_end(c, e);
}
