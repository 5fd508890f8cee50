/* Keyset paging's statements (page.h): the condition "after the cursor's row" is a row-value
 * comparison when every part of the key runs one way ((a, b) < ($1, $2), which both engines
 * answer from an index in that order), and its expanded form (a < $1 OR (a = $1 AND b > $2))
 * when the directions mix. */
#include "db/page.h"
#include "core/buf.h"
#include "core/util.h"

int db_keyset_parts(const db_keyset *ks) {
  int n = 0;
  while (n < DB_PAGE_MAX_KEY && ks->parts[n].sql) n++;
  return n;
}

/* " AND (<after the key>)": row values when the parts run one way, else the expanded form. */
static void after_key(struct buf *b, const db_page *pg, int first) {
  const db_key_part *p = pg->ks->parts;
  int n = pg->nkey;
  bool one_way = true;
  for (int i = 1; i < n; i++) one_way &= p[i].desc == p[0].desc;
  if (one_way) {
    buf_add(b, " AND (");
    for (int i = 0; i < n; i++) buf_addf(b, "%s%s", i ? ", " : "", p[i].sql);
    buf_addf(b, ") %s (", p[0].desc ? "<" : ">");
    for (int i = 0; i < n; i++) buf_addf(b, "%s$%d", i ? ", " : "", first + i);
    buf_add(b, ")");
    return;
  }
  buf_add(b, " AND (");
  for (int i = 0; i < n; i++) {
    buf_add(b, i ? " OR (" : "(");
    for (int j = 0; j < i; j++) buf_addf(b, "%s = $%d AND ", p[j].sql, first + j);
    buf_addf(b, "%s %s $%d)", p[i].sql, p[i].desc ? "<" : ">", first + i);
  }
  buf_add(b, ")");
}

const char *db_page_sql(arena *a, const db_page *pg, const char *sql, db_val *args, int *n) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  buf_add(&b, sql);
  if (pg->nkey) {
    after_key(&b, pg, *n + 1);
    for (int i = 0; i < pg->nkey; i++) args[(*n)++] = pg->key[i];
  }
  buf_add(&b, " ORDER BY ");
  for (int i = 0; pg->ks->parts[i].sql && i < DB_PAGE_MAX_KEY; i++)
    buf_addf(&b, "%s%s%s", i ? ", " : "", pg->ks->parts[i].sql, pg->ks->parts[i].desc ? " DESC" : "");
  if (pg->fetch > 0) {
    args[(*n)++] = DB_INT(pg->fetch);
    buf_addf(&b, " LIMIT $%d", *n);
  }
  if (buf_result(&b) != BUF_OK) oom();
  char *text = arena_strdup(a, buf_ptr(&b));
  buf_free(&b);
  return text;
}

db_rc db_page_query(arena *a, const db_page *pg, const char *sql, db_val *args, int n, db_res **out) {
  sql = db_page_sql(a, pg, sql, args, &n);
  return db_query(a, out, sql, args, n);
}

db_read db_page_read(arena *a, const db_page *pg, const char *sql, db_val *args, int n) {
  sql = db_page_sql(a, pg, sql, args, &n);
  return db_read_make(a, sql, args, n);
}

err_t db_page_rows(arena *a, const db_page *pg, const char *sql, const char *subject, db_res **out) {
  db_val args[DB_PAGE_ARGS(1)] = {DB_TEXT(subject)};
  return db_to_err(db_page_query(a, pg, sql, args, 1, out));
}
