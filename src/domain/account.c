/* The floor of a domain's part of an account (domain/domain.h): the statements of a forget_in,
 * the stored files its rows name, an export's members, each in its own writer until the export
 * puts them in order, and the reads of a domain's parts, run together. */
#include "domain/common.h"
#include "domain/domain.h"
#include <string.h>

err_t account_exec_in(db_conn *c, const account_ref *who, const char *const *sql, int n, int64_t *changes) {
  arena a;
  arena_init(&a);
  db_res *r = NULL;
  db_val args[] = {DB_TEXT(who->id), DB_INT(who->now)};
  db_rc rc = DB_OK;
  for (int i = 0; rc == DB_OK && i < n; i++)
    if (sql[i]) rc = db_exec(c, &a, &r, sql[i], args, strstr(sql[i], "$2") ? 2 : 1);
  if (changes) *changes = rc == DB_OK && r ? r->changes : 0;
  arena_fini(&a);
  return db_to_err(rc);
}

err_t account_files_in(db_conn *c, const account_ref *who, const char *sql) {
  if (!who->files) return ERR_OK;
  arena a;
  arena_init(&a);
  db_res *r;
  db_rc rc = db_exec(c, &a, &r, sql, DB_ARGS(DB_TEXT(who->id)));
  for (int i = 0; rc == DB_OK && i < r->rows; i++)
    for (int col = 0; col < r->cols; col++) common_cell_keys(who->files, db_text(r, i, col));
  arena_fini(&a);
  return db_to_err(rc);
}

jw *account_export_member(account_export *x, const char *key) {
  account_member *m = vec_push(x->a, &x->members);
  m->key = key;
  jw_init(&m->w, x->a, 256);
  return &m->w;
}

const account_member *account_export_find(const account_export *x, const char *key) {
  for (size_t i = 0; i < x->members.size; i++)
    if (!strcmp(x->members.items[i].key, key)) return &x->members.items[i];
  return NULL;
}

err_t account_read_in(db_conn *c, arena *a, const account_ref *who, const char *const (*sql)[2], int n, db_res **out) {
  db_read *reads = arena_alloc(a, sizeof *reads * (size_t)(n ? n : 1));
  int *part = arena_alloc(a, sizeof *part * (size_t)(n ? n : 1)), m = 0;
  db_val args[] = {DB_TEXT(who->id), DB_INT(who->now)};
  for (int i = 0; i < n; i++) {
    out[i] = NULL;
    const char *s = sql[i][who->provider];
    if (!s) continue;
    part[m] = i;
    reads[m++] = db_read_make(a, s, args, strstr(s, "$2") ? 2 : 1);
  }
  db_rc rc = m ? db_exec_all(c, a, reads, m) : DB_OK;
  for (int k = 0; rc == DB_OK && k < m; k++) out[part[k]] = reads[k].res;
  return db_to_err(rc);
}

void account_export_rows(account_export *x, const char *key, const hs_rj_field *fields, const db_res *r) {
  if (r) hs_rj_array(account_export_member(x, key), x->a, fields, r);
}

err_t account_export_parts_in(db_conn *c, const account_ref *who, account_export *x, const account_part *parts) {
  int n = 0;
  while (parts[n].key) n++;
  const char *(*sql)[2] = arena_alloc(x->a, sizeof *sql * (size_t)(n ? n : 1));
  db_res **r = arena_alloc(x->a, sizeof *r * (size_t)(n ? n : 1));
  for (int i = 0; i < n; i++) sql[i][0] = parts[i].sql[0], sql[i][1] = parts[i].sql[1];
  err_t e = account_read_in(c, x->a, who, (const char *const(*)[2])sql, n, r);
  for (int i = 0; !e && i < n; i++)
    (parts[i].one ? account_export_one : account_export_rows)(x, parts[i].key, parts[i].fields, r[i]);
  return e;
}

void account_export_one(account_export *x, const char *key, const hs_rj_field *fields, const db_res *r) {
  if (!r) return;
  jw *w = account_export_member(x, key);
  if (r->rows)
    hs_rj_object(w, hs_rj_bind(x->a, fields, r), r, 0);
  else
    jw_null(w);
}
