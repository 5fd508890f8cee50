/* providers table access. Uploads replace keys inside transactions that also queue the
 * recognition work, so a document is never left pending without a job to read it. */
#include "domain/providers/providers_store.h"
#include "core/clock.h"
#include "ext/queue.h"
#include <string.h>

err_t prov_store_get(arena *a, const char *id, db_res **row) {
  if (db_query(a, row, "SELECT * FROM providers WHERE id = $1", DB_ARGS(DB_TEXT(id))) != DB_OK) return ERR_INTERNAL;
  return (*row)->rows == 1 ? ERR_OK : ERR_NOT_FOUND;
}

static db_rc replace_list(db_conn *c, const char *table, const char *column, const char *id, json_t *values) {
  char sql[160];
  snprintf(sql, sizeof sql, "DELETE FROM %s WHERE provider_id = $1", table);
  db_rc rc = db_exec(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id)));
  snprintf(sql, sizeof sql, "INSERT INTO %s (provider_id, %s) VALUES ($1, $2)", table, column);
  size_t i;
  json_t *v;
  json_array_foreach(values, i, v) {
    if (rc != DB_OK) break;
    rc = db_exec(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v))));
  }
  return rc;
}

err_t prov_store_update_profile(const char *id, json_t *patch) {
  static const struct {
    const char *field, *column;
  } text_fields[] = {{"name", "name"}, {"phone", "phone"}, {"companyName", "company_name"}, {"companyUrl", "company_url"}};
  int64_t now = clock_now_ms();
  arena a;
  arena_init(&a);
  db_res *r;
  db_conn *c = db_acquire();
  db_rc rc = db_begin(c);
  if (rc == DB_OK) rc = db_exec(c, &a, &r, "UPDATE providers SET updated_at = $2 WHERE id = $1", DB_ARGS(DB_TEXT(id), DB_INT(now)));
  err_t e = rc != DB_OK ? ERR_INTERNAL : r->changes == 0 ? ERR_NOT_FOUND : ERR_OK;
  for (size_t i = 0; e == ERR_OK && rc == DB_OK && i < sizeof text_fields / sizeof *text_fields; i++) {
    json_t *v = json_object_get(patch, text_fields[i].field);
    if (!v) continue;
    char sql[120];
    snprintf(sql, sizeof sql, "UPDATE providers SET %s = $2 WHERE id = $1", text_fields[i].column);
    rc = db_exec(c, NULL, NULL, sql, DB_ARGS(DB_TEXT(id), DB_TEXT(json_string_value(v))));
  }
  json_t *services = json_object_get(patch, "services"), *zips = json_object_get(patch, "serviceZips");
  if (e == ERR_OK && rc == DB_OK && services) {
    char *text = json_dumps(services, JSON_COMPACT);
    rc = db_exec(c, NULL, NULL, "UPDATE providers SET services = $2 WHERE id = $1", DB_ARGS(DB_TEXT(id), DB_TEXT(text)));
    free(text);
    if (rc == DB_OK) rc = replace_list(c, "provider_services", "service", id, services);
  }
  if (e == ERR_OK && rc == DB_OK && zips) {
    char *text = json_dumps(zips, JSON_COMPACT);
    rc = db_exec(c, NULL, NULL, "UPDATE providers SET service_zips = $2 WHERE id = $1", DB_ARGS(DB_TEXT(id), DB_TEXT(text)));
    free(text);
    if (rc == DB_OK) rc = replace_list(c, "provider_zips", "zip", id, zips);
  }
  if (e == ERR_OK && rc == DB_OK) rc = db_commit(c);
  if (e == ERR_OK && rc != DB_OK) e = ERR_INTERNAL;
  db_release(c);
  arena_fini(&a);
  return e;
}

err_t prov_store_set_logo(arena *a, const char *id, const char *key, const char **old) {
  db_res *r;
  db_conn *c = db_acquire();
  err_t e = ERR_INTERNAL;
  if (db_begin(c) != DB_OK || db_exec(c, a, &r, "SELECT logo_url FROM providers WHERE id = $1", DB_ARGS(DB_TEXT(id))) != DB_OK)
    goto out;
  if (r->rows == 0) {
    e = ERR_NOT_FOUND;
    goto out;
  }
  *old = db_text(r, 0, 0);
  if (db_exec(c, NULL, NULL, "UPDATE providers SET logo_url = $2, updated_at = $3 WHERE id = $1",
              DB_ARGS(DB_TEXT(id), DB_TEXT(key), DB_INT(clock_now_ms()))) == DB_OK &&
      db_commit(c) == DB_OK)
    e = ERR_OK;
out:
  db_release(c);
  return e;
}

err_t prov_store_swap_headshots(const char *id, const char *old_json, const char *new_json) {
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_query(&a, &r, "UPDATE providers SET headshots = $3, updated_at = $4 WHERE id = $1 AND headshots = $2",
                      DB_ARGS(DB_TEXT(id), DB_TEXT(old_json), DB_TEXT(new_json), DB_INT(clock_now_ms())));
  err_t e = rc != DB_OK ? ERR_INTERNAL : r->changes == 1 ? ERR_OK : ERR_CONFLICT;
  arena_fini(&a);
  return e;
}

/* Queues recognition work and commits the open transaction; kicks the workers once it is in. */
static err_t queue_and_commit(db_conn *c, const char *kind, json_t *job) {
  db_rc rc = queue_enqueue(c, kind, job);
  json_decref(job);
  if (rc != DB_OK || db_commit(c) != DB_OK) return ERR_INTERNAL;
  queue_kick();
  return ERR_OK;
}

/* Reads columns a and b of provider id inside the open transaction. */
static err_t read_two(db_conn *c, arena *a, const char *sql, const char *id, const char **x, const char **y) {
  db_res *r;
  if (db_exec(c, a, &r, sql, DB_ARGS(DB_TEXT(id))) != DB_OK) return ERR_INTERNAL;
  if (r->rows == 0) return ERR_NOT_FOUND;
  *x = db_text(r, 0, 0), *y = db_text(r, 0, 1);
  return ERR_OK;
}

err_t prov_store_set_id_documents(arena *a, const char *id, const char *front, const char *back,
                                  const char **old_front, const char **old_back) {
  db_conn *c = db_acquire();
  err_t e = ERR_INTERNAL;
  if (db_begin(c) != DB_OK) goto out;
  if ((e = read_two(c, a, "SELECT id_doc_front, id_doc_back FROM providers WHERE id = $1", id, old_front, old_back)) !=
      ERR_OK)
    goto out;
  e = ERR_INTERNAL;
  const char *new_front = front ? front : *old_front, *new_back = back ? back : *old_back;
  if (!front) *old_front = NULL; /* kept, not replaced */
  if (!back) *old_back = NULL;
  if (db_exec(c, NULL, NULL,
              "UPDATE providers SET id_doc_front = $2, id_doc_back = $3, id_check_status = 'pending', "
              "id_check_name = NULL, id_check_dob = NULL, id_check_expiry = NULL, id_check_state = NULL, "
              "id_check_flags = NULL, id_check_at = NULL, updated_at = $4 WHERE id = $1",
              DB_ARGS(DB_TEXT(id), DB_TEXT(new_front), DB_TEXT(new_back), DB_INT(clock_now_ms()))) != DB_OK)
    goto out;
  e = queue_and_commit(c, "licence_check",
                       json_pack("{s:s,s:s?,s:s?}", "providerId", id, "front", new_front, "back", new_back));
out:
  db_release(c);
  return e;
}

err_t prov_store_set_insurance_document(arena *a, const char *id, const char *key, const char **old) {
  db_conn *c = db_acquire();
  err_t e = ERR_INTERNAL;
  const char *unused;
  if (db_begin(c) != DB_OK) goto out;
  if ((e = read_two(c, a, "SELECT ins_doc_url, id FROM providers WHERE id = $1", id, old, &unused)) != ERR_OK) goto out;
  e = ERR_INTERNAL;
  if (db_exec(c, NULL, NULL,
              "UPDATE providers SET ins_doc_url = $2, ins_check_status = 'pending', ins_check_carrier = NULL, "
              "ins_check_policy = NULL, ins_check_effective = NULL, ins_check_expiry = NULL, "
              "ins_check_coverage = NULL, ins_check_flags = NULL, ins_check_at = NULL, updated_at = $3 WHERE id = $1",
              DB_ARGS(DB_TEXT(id), DB_TEXT(key), DB_INT(clock_now_ms()))) != DB_OK)
    goto out;
  e = queue_and_commit(c, "insurance_check", json_pack("{s:s,s:s}", "providerId", id, "key", key));
out:
  db_release(c);
  return e;
}
