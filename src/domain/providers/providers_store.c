/* providers table access. Uploads replace keys inside transactions that also queue the
 * recognition work, so a document is never left pending without a job to read it. */
#include "domain/providers/providers_store.h"
#include "core/clock.h"
#include "ext/queue.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char PROVIDER_SQL[] = "SELECT * FROM providers WHERE id = $1";

err_t prov_store_get(arena *a, const char *id, db_res **row) {
  return db_query_row(a, row, PROVIDER_SQL, DB_ARGS(DB_TEXT(id)));
}

db_read prov_read(arena *a, const char *id) { return db_read_make(a, PROVIDER_SQL, DB_ARGS(DB_TEXT(id))); }

static bool listed(json_t *list, json_t *value) {
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) if (json_equal(v, value)) return true;
  return false;
}

/* The provider's rows of table (its services or its ZIPs) become values: a row it keeps stays
 * as it is, with the time it was added (a provider's replay counts from it: events.h), a new
 * one is added at now, the others go. old_text: the list before (the providers row's JSON copy,
 * always written with the rows). */
static db_rc replace_list(db_conn *c, const char *table, const char *column, const char *id, const char *old_text,
                          json_t *values, int64_t now) {
  char sql[160];
  json_t *old = old_text ? json_loads(old_text, 0, NULL) : NULL, *v;
  size_t i;
  db_rc rc = DB_OK;
  snprintf(sql, sizeof sql, "DELETE FROM %s WHERE provider_id = $1 AND %s = $2", table, column);
  json_array_foreach(old, i, v) {
    if (rc != DB_OK) break;
    if (!listed(values, v)) rc = db_exec_later(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v))));
  }
  json_decref(old);
  snprintf(sql, sizeof sql, "INSERT INTO %s (provider_id, %s, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
           table, column);
  json_array_foreach(values, i, v) {
    if (rc != DB_OK) break;
    rc = db_exec_later(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v)), DB_INT(now)));
  }
  return rc;
}

db_rc prov_store_insert_lists_in(db_conn *c, const char *id, json_t *services, json_t *zips, int64_t now) {
  db_rc rc = DB_OK;
  size_t i;
  json_t *v;
  json_array_foreach(services, i, v) {
    if (rc != DB_OK) break;
    rc = db_exec_later(c, NULL, NULL,
                       "INSERT INTO provider_services (provider_id, service, created_at) VALUES ($1, $2, $3)",
                       DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v)), DB_INT(now)));
  }
  json_array_foreach(zips, i, v) {
    if (rc != DB_OK) break;
    rc = db_exec_later(c, NULL, NULL, "INSERT INTO provider_zips (provider_id, zip, created_at) VALUES ($1, $2, $3)",
                       DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v)), DB_INT(now)));
  }
  return rc;
}

err_t prov_store_update_profile(const char *id, json_t *patch) {
  static const struct {
    const char *field, *column;
  } text_fields[] = {{"name", "name"}, {"phone", "phone"}, {"companyName", "company_name"}, {"companyUrl", "company_url"}};
  /* the lists: their JSON copy in the providers row (read back in that order below) and their rows */
  static const struct {
    const char *field, *column, *table, *row;
  } lists[] = {{"services", "services", "provider_services", "service"},
               {"serviceZips", "service_zips", "provider_zips", "zip"}};
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c;
  /* the lists as they were (they change below) */
  err_t e =
      db_begin_exec(&c, &a, &r, "UPDATE providers SET updated_at = $2 WHERE id = $1 RETURNING services, service_zips",
                    DB_ARGS(DB_TEXT(id), DB_INT(now)));
  if (!e && r->rows == 0) e = ERR_NOT_FOUND;
  for (size_t i = 0; !e && i < sizeof text_fields / sizeof *text_fields; i++) {
    json_t *v = json_object_get(patch, text_fields[i].field);
    if (!v) continue;
    char sql[120];
    snprintf(sql, sizeof sql, "UPDATE providers SET %s = $2 WHERE id = $1", text_fields[i].column);
    e = db_to_err(db_exec_later(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v)))));
  }
  for (size_t i = 0; !e && i < sizeof lists / sizeof *lists; i++) {
    json_t *list = json_object_get(patch, lists[i].field);
    if (!list) continue;
    char sql[120], *text = json_dumps(list, JSON_COMPACT);
    snprintf(sql, sizeof sql, "UPDATE providers SET %s = $2 WHERE id = $1", lists[i].column);
    e = db_to_err(db_exec_later(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(text))));
    free(text);
    if (!e) e = db_to_err(replace_list(c, lists[i].table, lists[i].row, id, db_text(r, 0, (int)i), list, now));
  }
  e = db_end(c, e);
  arena_fini(&a);
  return e;
}

/* Takes the provider's row lock and reads column (a no-op update returning it), so a
 * concurrent replacement waits and then sees this one's key as the one it replaces. */
static db_rc lock_read(db_conn *c, arena *a, const char *column, const char *id, db_res **r) {
  char sql[160];
  snprintf(sql, sizeof sql, "UPDATE providers SET updated_at = updated_at WHERE id = $1 RETURNING %s", column);
  return db_exec(c, a, r, sql, DB_ARGS(DB_TEXT(id)));
}

/* Begins a transaction on *c with the provider's row locked and column read into *r;
 * ERR_NOT_FOUND without such a provider (the transaction is open either way, for db_end). */
static err_t begin_locked(db_conn **c, arena *a, const char *column, const char *id, db_res **r) {
  err_t e = db_begin(c);
  if (!e) e = db_to_err(lock_read(*c, a, column, id, r));
  return !e && (*r)->rows == 0 ? ERR_NOT_FOUND : e;
}

err_t prov_store_set_logo(arena *a, const char *id, const char *key, const char **old) {
  db_res *r;
  db_conn *c;
  err_t e = begin_locked(&c, a, "logo_url", id, &r);
  if (!e) {
    *old = db_text(r, 0, 0);
    e = db_to_err(db_exec_later(c, NULL, NULL, "UPDATE providers SET logo_url = $2, updated_at = $3 WHERE id = $1",
                                DB_ARGS(DB_TEXT(id), DB_TEXT(key), DB_INT(clock_now_ms()))));
  }
  return db_end(c, e);
}

err_t prov_store_edit_headshots(arena *a, const char *id, headshots_edit edit, void *ctx, db_res **row) {
  db_conn *c;
  db_res *r = NULL;
  char *text = NULL;
  *row = NULL;
  /* the row lock first: the read below sees every edit before this one */
  err_t e = db_begin_exec(&c, a, &r,
                          "UPDATE providers SET updated_at = updated_at WHERE id = $1 AND deleted_at IS NULL "
                          "RETURNING headshots",
                          DB_ARGS(DB_TEXT(id)));
  if (!e && r->rows == 0) e = ERR_NOT_FOUND;
  if (!e) e = edit(ctx, db_field(r, 0, "headshots"), &text);
  if (!e) /* its row comes back with the COMMIT */
    e = db_to_err(db_exec_later(c, a, row,
                                "UPDATE providers SET headshots = $2, updated_at = $3 WHERE id = $1 RETURNING *",
                                DB_ARGS(DB_TEXT(id), DB_TEXT(text), DB_INT(clock_now_ms()))));
  free(text);
  return db_end(c, e);
}

/* Queues recognition work (job stolen) in the open transaction. */
static err_t queue_check(db_conn *c, const char *kind, json_t *job) {
  db_rc rc = queue_enqueue(c, kind, job);
  json_decref(job);
  return db_to_err(rc);
}

err_t prov_store_set_id_documents(arena *a, const char *id, const char *front, const char *back, const char **old_front,
                                  const char **old_back, db_res **row) {
  db_conn *c;
  *row = NULL;
  db_res *r;
  err_t e = begin_locked(&c, a, "id_doc_front, id_doc_back", id, &r);
  if (e) return db_end(c, e);
  *old_front = db_text(r, 0, 0), *old_back = db_text(r, 0, 1);
  const char *new_front = front ? front : *old_front, *new_back = back ? back : *old_back;
  if (!front) *old_front = NULL; /* kept, not replaced */
  if (!back) *old_back = NULL;
  /* its row comes back with the COMMIT */
  e = db_to_err(db_exec_later(c, a, row,
                              "UPDATE providers SET id_doc_front = $2, id_doc_back = $3, id_check_status = 'pending', "
                              "id_check_name = NULL, id_check_dob = NULL, id_check_expiry = NULL, "
                              "id_check_state = NULL, id_check_flags = NULL, id_check_at = NULL, updated_at = $4 "
                              "WHERE id = $1 RETURNING *",
                              DB_ARGS(DB_TEXT(id), DB_TEXT(new_front), DB_TEXT(new_back), DB_INT(clock_now_ms()))));
  if (!e)
    e = queue_check(c, "licence_check",
                    json_pack("{s:s,s:s?,s:s?}", "providerId", id, "front", new_front, "back", new_back));
  return db_end(c, e);
}

err_t prov_store_set_insurance_document(arena *a, const char *id, const char *key, const char **old) {
  db_res *r;
  db_conn *c;
  err_t e = begin_locked(&c, a, "ins_doc_url", id, &r);
  if (!e) *old = db_text(r, 0, 0);
  if (!e)
    e = db_to_err(
        db_exec_later(c, NULL, NULL,
                "UPDATE providers SET ins_doc_url = $2, ins_check_status = 'pending', ins_check_carrier = NULL, "
                "ins_check_policy = NULL, ins_check_effective = NULL, ins_check_expiry = NULL, "
                "ins_check_coverage = NULL, ins_check_flags = NULL, ins_check_at = NULL, updated_at = $3 WHERE id = $1",
                DB_ARGS(DB_TEXT(id), DB_TEXT(key), DB_INT(clock_now_ms()))));
  if (!e) e = queue_check(c, "insurance_check", json_pack("{s:s,s:s}", "providerId", id, "key", key));
  return db_end(c, e);
}

/* The flags as JSON array text (heap, free()). */
static char *flags_text(const char flags[][24], int n) {
  json_t *a = json_array();
  for (int i = 0; i < n; i++) json_array_append_new(a, json_string(flags[i]));
  char *text = json_dumps(a, JSON_COMPACT);
  json_decref(a);
  return text;
}

static const char *or_null(const char *s) { return s && *s ? s : NULL; }

err_t prov_store_record_licence(const char *id, const char *front, const char *back, const licence_result *res) {
  char *flags = flags_text(res->flags, res->nflags);
  db_rc rc = db_query(NULL, NULL,
                      "UPDATE providers SET id_check_status = $4, id_check_name = $5, id_check_dob = $6, "
                      "id_check_expiry = $7, id_check_state = $8, id_check_flags = $9, id_check_at = $10, "
                      "updated_at = $10 WHERE id = $1 AND COALESCE(id_doc_front, '') = COALESCE($2, '') "
                      "AND COALESCE(id_doc_back, '') = COALESCE($3, '')",
                      DB_ARGS(DB_TEXT(id), DB_TEXT(front), DB_TEXT(back), DB_TEXT(res->status),
                              DB_TEXT(or_null(res->name)), DB_TEXT(or_null(res->dob)), DB_TEXT(or_null(res->expiry)),
                              DB_TEXT(or_null(res->state)), DB_TEXT(flags), DB_INT(clock_now_ms())));
  free(flags);
  return db_to_err(rc);
}

err_t prov_store_record_insurance(const char *id, const char *key, const insurance_result *res) {
  char *flags = flags_text(res->flags, res->nflags);
  db_rc rc = db_query(NULL, NULL,
                      "UPDATE providers SET ins_check_status = $3, ins_check_carrier = $4, ins_check_policy = $5, "
                      "ins_check_effective = $6, ins_check_expiry = $7, ins_check_coverage = $8, "
                      "ins_check_flags = $9, ins_check_at = $10, insurance_info = $11, updated_at = $10 "
                      "WHERE id = $1 AND ins_doc_url = $2",
                      DB_ARGS(DB_TEXT(id), DB_TEXT(key), DB_TEXT(res->status), DB_TEXT(or_null(res->carrier)),
                              DB_TEXT(or_null(res->policy)), DB_TEXT(or_null(res->effective)),
                              DB_TEXT(or_null(res->expiry)), DB_TEXT(or_null(res->coverage)), DB_TEXT(flags),
                              DB_INT(clock_now_ms()), DB_TEXT(res->fields_found >= 2 ? or_null(res->summary) : NULL)));
  free(flags);
  return db_to_err(rc);
}

/* ---- the account's part (domain/domain.h) ---- */

/* devicePushToken: the token of the device registered last */
const char *const PROV_EXPORT_SQL[1][2] = {
    {NULL, "SELECT p.*, (SELECT d.token FROM push_devices d WHERE d.account_id = p.id AND d.role = 'provider' "
           "ORDER BY d.updated_at DESC, d.device_id LIMIT 1) AS push_token FROM providers p WHERE p.id = $1 "
           "AND p.deleted_at IS NULL"}};

/* $1 = the provider's id: [mode]. At an erasure its row keeps only what the ledger shows: its
 * id and name ACCOUNT_DELETED_NAME (the account's own columns are auth's, its membership and
 * schedule providers_tools_store.c's). */
static const char *const forget_sql[][3] = {
    [FORGET_ERASE] =
        {"DELETE FROM provider_services WHERE provider_id = $1", "DELETE FROM provider_zips WHERE provider_id = $1",
         "UPDATE providers SET name = '" ACCOUNT_DELETED_NAME "', phone = NULL, company_name = NULL, "
         "company_url = NULL, logo_url = NULL, insurance_info = NULL, services = '[]', service_zips = '[]', "
         "headshots = '[]', id_doc_front = NULL, id_doc_back = NULL, id_check_status = NULL, "
         "id_check_name = NULL, id_check_dob = NULL, id_check_expiry = NULL, id_check_state = NULL, "
         "id_check_flags = NULL, id_check_at = NULL, ins_doc_url = NULL, ins_check_status = NULL, "
         "ins_check_carrier = NULL, ins_check_policy = NULL, ins_check_effective = NULL, "
         "ins_check_expiry = NULL, ins_check_coverage = NULL, ins_check_flags = NULL, ins_check_at = NULL "
         "WHERE id = $1"},
    [FORGET_DELETE] = {"DELETE FROM provider_services WHERE provider_id = $1",
                       "DELETE FROM provider_zips WHERE provider_id = $1"},
};

err_t prov_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  if (!who->provider) return ERR_OK;
  err_t e = account_files_in(
      c, who, "SELECT logo_url, headshots, id_doc_front, id_doc_back, ins_doc_url FROM providers WHERE id = $1");
  return e ? e : account_exec_in(c, who, forget_sql[mode], 3, NULL);
}
