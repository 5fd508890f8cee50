/* SQL of the audit chain (tables audit_log and audit_tip). Internal to the audit domain. */
#ifndef DOMAIN_AUDIT_AUDIT_STORE_H
#define DOMAIN_AUDIT_AUDIT_STORE_H
#include "db/db.h"
#include "db/page.h"
#include "domain/audit/audit_chain.h"

/* Appends r on c inside the caller's transaction: takes the next seq and the previous hash
 * from the tip (an UPDATE, which holds the tip's row lock on PostgreSQL and runs under
 * SQLite's single writer), hashes r, inserts it and moves the tip. Fills r->seq, r->id and
 * r->prev_hash (arena a). */
db_rc audit_store_append(db_conn *c, arena *a, audit_record *r);
/* Up to limit records with after < seq <= upto, in seq order (all columns). */
db_rc audit_store_page(arena *a, int64_t after, int64_t upto, int limit, db_res **out);
/* The rows outside the chain's positions 1..tip (seq and id; seq NULL where a constraint was
 * dropped to write one), those without a seq first, then in seq order. */
db_rc audit_store_outside(arena *a, int64_t tip, db_res **out);
/* The rows migration 0014 set aside because their seq was not above 0 (seq and id). */
db_rc audit_store_set_aside(arena *a, db_res **out);
/* The tip: its seq and hash. */
db_rc audit_store_tip(arena *a, int64_t *seq, const char **hash);
/* Where the keyed chain starts (audit_tip.keyed_from, migration 0023): every record from that
 * seq on must carry a keyed hash. 0 when the value is NULL (a constraint dropped to write it). */
db_rc audit_store_keyed_from(arena *a, int64_t *seq);
/* The request and outcome records of every elevation within the chain (1..tip), in seq order. */
db_rc audit_store_sessions_events(arena *a, db_res **out);
/* The page pg of actor_id's actions and impersonated requests (AUDIT_ACTOR_KEYSET), each
 * request with its outcome's status. */
err_t audit_store_of_actor(arena *a, const char *actor_id, const db_page *pg, db_res **out);

/* A record as read back from a row of audit_store_page. */
audit_record audit_store_record(const db_res *r, int row);

#endif
