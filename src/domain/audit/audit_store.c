/* The chain's tip row is the lock: the first statement of an append updates it, so on
 * PostgreSQL a concurrent append waits for the transaction holding it and then reads the seq
 * and hash that transaction committed; on SQLite the write transaction already excludes
 * other writers. Either way no two records share a predecessor. */
#include "domain/audit/audit_store.h"
#include "core/ids.h"
#include <stdlib.h>

static int64_t int_or_zero(const db_res *r, int row, const char *name) {
  const char *v = db_field(r, row, name);
  return v ? strtoll(v, NULL, 10) : 0;
}

audit_record audit_store_record(const db_res *r, int row) {
  return (audit_record){
      .seq = int_or_zero(r, row, "seq"),
      .id = db_field(r, row, "id"),
      .kind = db_field(r, row, "kind"),
      .elevation_id = db_field(r, row, "elevation_id"),
      .actor_id = db_field(r, row, "actor_id"),
      .actor_role = db_field(r, row, "actor_role"),
      .action = db_field(r, row, "action"),
      .target_id = db_field(r, row, "target_id"),
      .target_role = db_field(r, row, "target_role"),
      .method = db_field(r, row, "method"),
      .path = db_field(r, row, "path"),
      .status = (int)int_or_zero(r, row, "status"),
      .body = db_field(r, row, "body"),
      .ref_seq = int_or_zero(r, row, "ref_seq"),
      .created_at = int_or_zero(r, row, "created_at"),
      .prev_hash = db_field(r, row, "prev_hash"),
  };
}

db_rc audit_store_append(db_conn *c, arena *a, audit_record *r) {
  db_res *tip;
  db_rc rc = db_exec(c, a, &tip, "UPDATE audit_tip SET seq = seq + 1 WHERE id = 1 RETURNING seq, hash", DB_NOARGS);
  if (rc != DB_OK) return rc;
  if (tip->rows != 1) return DB_ERROR;
  char *id = arena_alloc(a, ID_LEN + 1), hash[65];
  id_new(id);
  r->id = id;
  r->seq = db_int(tip, 0, 0);
  r->prev_hash = db_text(tip, 0, 1);
  size_t keylen;
  const char *key = audit_key(&keylen);
  audit_record_hash(r, key, keylen, hash);
  /* the record and the new tip need no answer: they go with the transaction's next statement */
  rc = db_exec_later(
      c, NULL, NULL,
      "INSERT INTO audit_log (seq, id, kind, elevation_id, actor_id, actor_role, action, target_id, "
      "target_role, method, path, status, body, ref_seq, created_at, prev_hash, hash) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
      DB_ARGS(DB_INT(r->seq), DB_TEXT(r->id), DB_TEXT(r->kind), DB_TEXT(r->elevation_id), DB_TEXT(r->actor_id),
              DB_TEXT(r->actor_role), DB_TEXT(r->action), DB_TEXT(r->target_id), DB_TEXT(r->target_role),
              DB_TEXT(r->method), DB_TEXT(r->path), r->status ? DB_INT(r->status) : DB_NULL, DB_TEXT(r->body),
              r->ref_seq ? DB_INT(r->ref_seq) : DB_NULL, DB_INT(r->created_at), DB_TEXT(r->prev_hash), DB_TEXT(hash)));
  if (rc == DB_OK)
    rc = db_exec_later(c, NULL, NULL, "UPDATE audit_tip SET hash = $1 WHERE id = 1", DB_ARGS(DB_TEXT(hash)));
  return rc;
}

db_rc audit_store_page(arena *a, int64_t after, int64_t upto, int limit, db_res **out) {
  return db_query(a, out, "SELECT * FROM audit_log WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT $3",
                  DB_ARGS(DB_INT(after), DB_INT(upto), DB_INT(limit)));
}

db_rc audit_store_outside(arena *a, int64_t tip, db_res **out) {
  return db_query(a, out,
                  "SELECT seq, id FROM audit_log WHERE seq IS NULL OR seq < 1 OR seq > $1 "
                  "ORDER BY CASE WHEN seq IS NULL THEN 0 ELSE 1 END, seq",
                  DB_ARGS(DB_INT(tip)));
}

db_rc audit_store_set_aside(arena *a, db_res **out) {
  return db_query(a, out, "SELECT seq, id FROM audit_log_set_aside ORDER BY id", DB_NOARGS);
}

db_rc audit_store_tip(arena *a, int64_t *seq, const char **hash) {
  db_res *r;
  db_rc rc = db_query(a, &r, "SELECT seq, hash FROM audit_tip WHERE id = 1", DB_NOARGS);
  if (rc != DB_OK) return rc;
  if (r->rows != 1) return DB_ERROR;
  *seq = db_int(r, 0, 0);
  *hash = db_text(r, 0, 1);
  return DB_OK;
}

db_rc audit_store_keyed_from(arena *a, int64_t *seq) {
  db_res *r;
  db_rc rc = db_query(a, &r, "SELECT keyed_from FROM audit_tip WHERE id = 1", DB_NOARGS);
  if (rc != DB_OK) return rc;
  if (r->rows != 1) return DB_ERROR;
  *seq = int_or_zero(r, 0, "keyed_from");
  return DB_OK;
}

db_rc audit_store_sessions_events(arena *a, db_res **out) {
  return db_query(a, out,
                  "SELECT seq, id, kind, elevation_id, method, path, status, body, ref_seq, created_at FROM audit_log "
                  "WHERE elevation_id IS NOT NULL AND kind IN ('request', 'outcome') AND seq > 0 "
                  "AND seq <= (SELECT seq FROM audit_tip WHERE id = 1) ORDER BY seq",
                  DB_NOARGS);
}

err_t audit_store_of_actor(arena *a, const char *actor_id, const db_page *pg, db_res **out) {
  return db_page_rows(a, pg,
                      "SELECT l.seq, l.id, l.kind, l.elevation_id, l.action, l.target_id, l.target_role, l.method, "
                      "l.path, l.body, l.created_at, (SELECT o.status FROM audit_log o WHERE o.actor_id = l.actor_id "
                      "AND o.kind = 'outcome' AND o.ref_seq = l.seq) AS status FROM audit_log l "
                      "WHERE l.actor_id = $1 AND l.kind IN ('action', 'request') AND l.seq > 0",
                      actor_id, out);
}
