/* Requests to the outside world, claimed before they are made: the claim, the lease, the
 * hand-over. The payment processor's requests of the payments and payouts domains and the
 * simulated processor's idempotency keys all go through it.
 *
 * The claim. Whoever writes first wins; the others read what the winner wrote and act on it:
 * a conditional write that returns what it wrote, else a read (db_claim_first). The simulated
 * processor claims an idempotency key so (its twin waits for the winner's object), the payments
 * store a customer's processor id and premium subscribe key, the payouts store a connected
 * account.
 *
 * The lease. A request that moves money at the processor is written on a row of its own kind
 * before it is made: the row names it (pending_op, idem_key) and says when its carrier started
 * it (op_started_at), and its outcome is recorded only while the row still names it. The carrier
 * holds the request for DB_LEASE_MS; nobody else touches it meanwhile. A carrier that got no
 * answer lets go at once (db_lease_leave: recorded as started a lease ago), and one that stopped
 * lets go when its lease runs out. Then anyone may take the request over, by one conditional
 * update so that one of several wins (db_lease_take_over), and settle it: ask the processor what
 * the key made before repeating anything, under the same key.
 *
 *   db_lease l = pay_store_lease(p);              (the owning store names its table)
 *   if (no answer) return db_lease_leave(&l);     ERR_UNAVAILABLE: settled later
 *   e = db_lease_take_over(a, &l, db_lease_over(), run_claimed);
 *
 * The table of a leased request has the columns id, pending_op, idem_key, op_started_at and
 * updated_at; its store names it (each table keeps one owner), and the statements here change
 * only those columns. Thread-safe: every call runs on a connection of its own. */
#ifndef DB_LEASE_H
#define DB_LEASE_H
#include "db/db.h"

/* How long the carrier of a request holds it: a request untouched this long is settled by
 * someone else. */
#define DB_LEASE_MS (2LL * 60 * 1000)

/* A request as read from its row: the owner's table, the row's id, the request's op and key. */
typedef struct db_lease {
  const char *table, *id, *op, *key;
} db_lease;

/* Reads row id of a leased table again and carries out the request it names (claimed or taken
 * over just now); settling: its first carrier's answer was lost, so the processor is asked what
 * the key made first. The domain's; ERR_UNAVAILABLE when the outcome is still not known. */
typedef err_t (*db_lease_run)(arena *a, const char *id, bool settling);

/* A request started before this (service clock) has no carrier any more. */
int64_t db_lease_over(void);
/* Takes over the request l names (its op and key as read) when nobody started it since
 * stale_before, and has run settle it. ERR_UNAVAILABLE when someone else holds it (or took it
 * first); otherwise what run returned. */
err_t db_lease_take_over(arena *a, const db_lease *l, int64_t stale_before, db_lease_run run);
/* Lets go of the request l names, its outcome unknown: recorded as started a lease ago, so
 * anyone may settle it now. Returns ERR_UNAVAILABLE ("not known yet, try again later"), for a
 * carrier to return; a failure to record it only delays the settling by a lease. */
err_t db_lease_leave(const db_lease *l);

/* The first claim wins: runs claim (a conditional write that returns a row when it wrote) and,
 * when it returned none, find (reads what the winner wrote). *out holds the row in force (none
 * when find finds nothing: released meanwhile), in a; *won tells whether claim wrote it. Each
 * statement on a connection of its own. */
db_rc db_claim_first(arena *a, const db_read *claim, const db_read *find, db_res **out, bool *won);

#endif
