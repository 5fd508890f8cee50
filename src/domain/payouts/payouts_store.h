/* SQL of the payouts domain: payout_accounts, payout_transfers, payout_fees. Internal. */
#ifndef DOMAIN_PAYOUTS_STORE_H
#define DOMAIN_PAYOUTS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/lease.h"
#include "db/page.h"
#include "domain/payouts/payouts.h"
#include <stdbool.h>
#include <stdint.h>

/* A provider's connected account as last recorded. */
typedef struct account_row {
  const char *provider_id, *processor_account_id, *status, *requirements; /* requirements: JSON array text */
  bool payouts_enabled;
} account_row;

/* A payout_transfers row, with its provider's email and name, its job's service and the
 * PaymentIntent of its payment (source_intent). Times are epoch ms, 0 for NULL. */
typedef struct transfer_row {
  const char *id, *provider_id, *job_id, *payment_id, *kind, *status, *failure_reason, *destination;
  const char *processor_transfer_id, *pending_op, *idem_key;
  const char *email, *name, *service, *source_intent;
  int64_t earned_cents, amount_cents, fee_cents, sent_cents, reversed_cents, op_cents;
  int64_t available_at, paid_at, op_started_at, attempts;
  int64_t netted_cents; /* the balance it paid off, besides its fee */
} transfer_row;

/* An email written with a change, in its transaction (to NULL: none). */
typedef struct po_mail {
  const char *to, *subject, *body;
} po_mail;

/* ---- accounts ---- */

err_t po_store_account(arena *a, const char *provider_id, account_row *out, bool *found);
/* The provider's email (ERR_NOT_FOUND when there is no such provider). */
err_t po_store_provider_email(arena *a, const char *provider_id, const char **email);
/* Records the provider's new account unless it has one; *winner: the processor id in force. */
err_t po_store_insert_account(arena *a, const char *provider_id, const char *processor_id, const char *status,
                              bool payouts_enabled, const char *requirements, const char **winner);
/* Records the state of processor account processor_id and moves its provider's transfers not
 * under way with it, in one transaction: enabled, those waiting for it or failed are scheduled
 * again (and their making queued); otherwise scheduled ones wait. *provider: whose it is (NULL
 * when nobody's). */
err_t po_store_apply_account(arena *a, const char *processor_id, const char *status, bool payouts_enabled,
                             const char *requirements, const char **provider);

/* ---- transfers: changes made inside another domain's transaction (payouts.h) ---- */

db_rc po_store_captured_in(db_conn *c, const char *payment_id, bool *added);
db_rc po_store_refunded_in(db_conn *c, const char *payment_id);
db_rc po_store_hold_in(db_conn *c, const char *job_id, int64_t until, int64_t *held_cents);
/* The read of payouts_read_job_transfers. */
db_read po_read_job_transfers(arena *a, const char *job_id);
db_rc po_store_dispute_in(db_conn *c, const char *job_id, bool open);
db_rc po_store_forget_customer_in(db_conn *c, const char *customer_id);
db_rc po_store_release_job_in(db_conn *c, const char *job_id);
/* po_store_captured_in in a transaction of its own. */
err_t po_store_captured(const char *payment_id, bool *added);

/* ---- transfers: making them ---- */

err_t po_store_get(arena *a, const char *id, transfer_row *out, bool *found);

typedef enum {
  PO_NOT_DUE, /* not scheduled and due, or someone else claimed it: nothing to do */
  PO_WAITING, /* its provider's account is not enabled: it waits for it now */
  PO_CLAIMED, /* the transfer request is written on it (pending_op transfer): carry it out */
} po_claim;
/* Claims transfer id when it is scheduled and due and its provider's account enabled (the
 * account's row is locked, so one provider's claims run one after another): writes the
 * request (key transfer-<id>-<attempt>, the account as destination) and what it nets: the
 * month's Preferred Pro fee is billed (payout_fees, and write(c, provider, month)) with the
 * month's first claim, and what is still owed of billed fees is deducted, up to the transfer's
 * amount, as a fee row; then what the provider owes besides (payout_debts) is netted from what
 * is left, as a netted row. */
err_t po_store_claim(const char *id, payouts_billed_writer write, po_claim *result);
/* Records p's transfer request as made (processor_transfer_id; NULL for one that moved no
 * money: the fee took all of it), its fee row paid, mail written, and the reversal queued of
 * what a refund took meanwhile, in one transaction; *moved false when the row no longer names
 * that request. */
err_t po_store_record_paid(const transfer_row *t, const char *processor_transfer_id, const po_mail *mail, bool *moved);
/* Records t's transfer request as refused: status (waiting_for_account, scheduled to be tried
 * again, or failed) with reason; its fee deduction is void (the fee row cancelled). */
err_t po_store_record_refused(const transfer_row *t, const char *status, const char *reason, bool *moved);
/* t's pending request as the lease knows it (db/lease.h: taken over, or left to be settled). */
db_lease po_store_lease(const transfer_row *t);
/* Claims a reversal of t (paid, nothing pending, attempt as read) for what was sent beyond
 * what it earns now less its fee, under key reversal-<id>-<attempt>. */
err_t po_store_claim_reversal(const transfer_row *t, bool *claimed);
/* Records t's reversal as made (reversed_cents grows; status reversed once all that was sent
 * went back; another reversal queued when a refund came meanwhile) or refused (reason): what it
 * asked for is debited instead, a debt of the provider's (payout_debts), never asked again. */
err_t po_store_record_reversal(const transfer_row *t, const char *refused, bool *moved);

/* Ends the holds due by now (those transfers scheduled, or waiting for their account). */
err_t po_store_release_holds(int64_t now, int *released);
/* Queues the making ("payout_transfer") of every transfer due by now (of provider_id, or all
 * when NULL), at most limit, each once per state (a dedupe key of its id, attempt and update). */
err_t po_store_queue_due(const char *provider_id, int64_t now, int limit, int *queued);
/* Transfers and payments in uncertain states: id, what ("pending": a request left unsettled
 * since before stale_before; "reverse": a refunded share not reversed yet; "capture": a
 * captured payment without a transfer, by the payment's id). */
err_t po_store_uncertain(arena *a, int64_t stale_before, int limit, db_res **out);

/* ---- reading ---- */

/* The order of a provider's transfers: newest first, by (seq, id) descending. */
extern const db_keyset TRANSFERS_KEYSET;
/* The page pg of the provider's transfers: id, job_id, kind, amount_cents, reversed_cents,
 * status, available_at, paid_at, failure_reason, seq. */
err_t po_store_list(arena *a, const char *provider_id, const db_page *pg, db_res **out);
/* The provider's totals in cents: scheduled (scheduled, waiting for the account or failed),
 * on_hold, paid (what reached the account and stayed), reversed, and owed (what it owes the
 * platform: its balance, negated). */
err_t po_store_totals(arena *a, const char *provider_id, db_res **out);
/* The read of payouts_provider_records. */
db_read po_read_records(arena *a, const char *provider_id);
/* The read of payouts_owed: one row, owed_cents and fees_owed_cents. */
db_read po_read_owed(arena *a, const char *provider_id);
/* Providers that owe the platform something: provider_id, owed_cents (for reconcile). */
err_t po_store_owing(arena *a, db_res **out);

/* The export's reads of a provider (account_part's sql): its payout account (none or one row) and
 * its transfers, oldest first. Both stay at an erasure, the ledger's (no forget_in). */
extern const char *const PO_EXPORT_SQL[2][2];

#endif
