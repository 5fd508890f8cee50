/* SQL of the payments domain: billing fields of users, payments rows, webhook events. */
#ifndef DOMAIN_PAYMENTS_STORE_H
#define DOMAIN_PAYMENTS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/lease.h"
#include "db/page.h"
#include "domain/audit/audit.h"
#include "domain/domain.h"
#include "domain/notifications/notifications.h"
#include "ext/payments.h"
#include <jansson.h>
#include <stdbool.h>

typedef struct billing {
  const char *id, *email, *name;
  const char *customer_id, *payment_method_id, *subscription_id, *subscribe_key;
  bool is_premium, cancel_at_period_end, subscribe_unconfirmed;
  const char *premium_since; /* epoch ms text or NULL */
} billing;

/* A payments row. pending_op names the processor request whose outcome is not recorded yet
 * (NULL when none), made with idem_key and method_id for amount_cents (a refund: the amount of
 * its payment_refunds row); op_started_at is when its current carrier started it (a released
 * request: a lease before its release). hold_method_id is the card of the live hold.
 * released_at is set once the payment moved to its job's history. Times are epoch ms, 0 for
 * NULL. */
typedef struct payment_row {
  const char *id, *job_id, *user_id, *kind, *status, *intent_id, *failure_reason;
  const char *pending_op, *idem_key, *method_id, *hold_method_id;
  int64_t amount_cents, op_started_at, attempts, hold_expires_at, refunded_cents, released_at;
  const char *card_brand, *card_last4; /* the card the hold or charge was made on (NULL: not known) */
  int64_t lost_cents;                  /* what lost disputes took */
  const char *dispute_json;            /* the Payment JSON's dispute (its latest), NULL when none */
} payment_row;

/* What a payment change tells people, written in the change's own transaction: an optional
 * email (to NULL: none) and up to two notifications. */
typedef struct pay_news {
  const char *to, *subject, *body;
  notice notes[2];
  int nnotes;
} pay_news;

/* The outcome of a payment's pending request (any but a refund). */
typedef struct pay_settle {
  const char *status;                  /* AUTHORIZED, PAID, FAILED, CANCELED */
  const char *intent_id;               /* NULL keeps the recorded one */
  int64_t captured_cents;              /* PAID for less than the amount (a partial capture); 0: all of it */
  const char *card_brand, *card_last4; /* the card it was made on; NULL keeps the recorded one */
  int64_t hold_expires_at;             /* 0: none */
  const char *hold_method;             /* the card of a new hold; NULL keeps the recorded one */
  const char *failure_reason;          /* NULL clears it */
  const char *cancel_intent;           /* an authorization to cancel in the background (a replaced hold) */
  const pay_news *news;                /* may be NULL */
} pay_settle;

/* A refund the service asks for: its payment_refunds row. */
typedef struct refund_row {
  const char *id, *payment_id, *reason, *source, *staff_id, *status, *idem_key, *processor_refund_id;
  const char *failure_reason;
  int64_t amount_cents, created_at;
  const char *provider_share; /* "prorata" (the provider's transfer gives its share back) or "none" */
} refund_row;

/* The people and the job a job's payment concerns: the accepted quote (NULL, 0 without one)
 * and its provider's name (NULL without a provider). */
typedef struct pay_context {
  const char *customer_email, *customer_name, *provider_id, *service, *job_status;
  const char *quote_id, *provider_name;
  int64_t quote_cents, total_cents;
} pay_context;

err_t pay_store_billing(arena *a, const char *user_id, billing *out);
/* Stores customer_id unless the user has one; *winner gets the id in force afterwards. */
err_t pay_store_set_customer(arena *a, const char *user_id, const char *customer_id, const char **winner);
/* Saves the card and queues the recovery of the user's failed payments (queue kind
 * "payment_recover", payload { userId, paymentMethodId }) in one transaction. */
err_t pay_store_set_method(const char *user_id, const char *payment_method_id);
/* Clears the saved method when it is still `payment_method_id`. */
err_t pay_store_clear_method(const char *user_id, const char *payment_method_id);
/* Sets the subscribe key unless one is set; *winner gets the key in force. */
err_t pay_store_claim_subscribe_key(arena *a, const char *user_id, const char *key, const char **winner);
/* Drops the subscribe key when it is still `key` (NULL: whatever it is). */
err_t pay_store_clear_subscribe_key(const char *user_id, const char *key);
/* Marks the subscribe attempt under key as answered by nobody (its outcome must be asked). */
err_t pay_store_mark_subscribe_unconfirmed(const char *user_id, const char *key);
err_t pay_store_set_premium(const char *user_id, const char *subscription_id, bool active, bool cancel_at_period_end);
err_t pay_store_set_cancel_flag(const char *user_id, bool cancel_at_period_end);

/* ---- payments rows ---- */

/* What recording a payment came to. */
typedef enum {
  PAY_INSERTED,
  PAY_INSERT_TAKEN,       /* the job already has a current payment of that kind (the unique index) */
  PAY_INSERT_UNAVAILABLE, /* the database did not answer */
  PAY_INSERT_FAILED,      /* any other failure */
} pay_insert_outcome;
/* Inserts p (id, job_id, user_id, kind, status, amount_cents, failure_reason, and when
 * pending_op is set: idem_key, method_id, started now, attempt 1) with its news, in one
 * transaction. */
pay_insert_outcome pay_store_insert(const payment_row *p, const pay_news *news);
/* The job's current payment of kind (not one in its history). */
err_t pay_store_find(arena *a, const char *job_id, const char *kind, payment_row *out, bool *found);
/* The same payment as a result (every column of payment_row, by its name; no row when none), in a. */
err_t pay_store_find_rows(arena *a, const char *job_id, const char *kind, db_res **out);
err_t pay_store_get(arena *a, const char *id, payment_row *out, bool *found);
/* Starts a new request on payment id: op under key with method (NULL keeps the recorded
 * one) for cents (0 keeps the amount), when the status is `from` and nothing is pending. A
 * request that would make the payment's hold or charge (authorize, charge, tip) makes it
 * PENDING until its outcome is recorded. */
err_t pay_store_claim(const char *id, const char *from, const char *op, const char *key, const char *method,
                      int64_t cents, bool *claimed);
/* p's pending request as the lease knows it (db/lease.h: taken over, or left to be settled). */
db_lease pay_store_lease(const payment_row *p);
/* Records the outcome of p's pending request (when it is still that request: op and key),
 * with the replaced hold's cancellation, the tip amount on the job for a paid tip, and the
 * news, in one transaction. *moved is false when someone else recorded it first, or when the
 * payment became PAID meanwhile (a processor event: PAID is final), in which case only the
 * request is cleared. */
err_t pay_store_settle(const payment_row *p, const pay_settle *s, bool *moved);
/* Replaces p's pending request by another (a capture that found no live hold becomes a
 * charge: the payment reads PENDING), when it is still that request. */
err_t pay_store_switch(const payment_row *p, const char *op, const char *key, const char *method, bool *switched);
err_t pay_store_context(arena *a, const char *job_id, pay_context *out);
/* The job's status, customer and accepted quote's total (0 without one); *status NULL when the
 * job does not exist. */
err_t pay_store_job_terms(arena *a, const char *job_id, const char **status, const char **customer, int64_t *cents);

/* ---- refunds ---- */

/* Starts refund r (id, idem_key, amount_cents, reason, source, staff_id) of payment p: inserts
 * its row (PENDING) and records it as p's pending request, when p is PAID with nothing pending
 * and r fits in what is left, with the audit record act (NULL: none), in one transaction.
 * *claimed is false when p changed meanwhile (nothing is written). */
err_t pay_store_claim_refund(const payment_row *p, const refund_row *r, const audit_action *act, bool *claimed);
err_t pay_store_refund_by_key(arena *a, const char *idem_key, refund_row *out, bool *found);
/* The outcome of p's pending refund: made (processor_refund_id, its amount added to the
 * payment's refunded_cents, REFUNDED once all is) or refused (failure_reason), with news
 * (when made), in one transaction. *moved as for pay_store_settle. */
err_t pay_store_settle_refund(const payment_row *p, const char *processor_refund_id, const char *failure_reason,
                              const pay_news *news, bool *moved);

/* ---- a job's payment history ---- */

/* Moves payments to their job's history (released_at), in the caller's transaction c, and
 * queues for each the giving back of its money ("payment_release"): its job's current
 * payments (job_id), or those of a job whose acceptance came after them (stale_only), or the
 * current payments of every job assigned to provider_id that is not cancelled. */
db_rc pay_store_history_in(db_conn *c, const char *job_id, const char *provider_id, bool stale_only, int *released);
/* The same in a transaction of its own. */
err_t pay_store_history(const char *job_id, bool stale_only, int *released);
/* Records a charge that duplicates payment p's (intent, cents) as a payment of its job's
 * history (kind "duplicate", PAID) unless recorded already; *id gets its id. */
err_t pay_store_record_duplicate(arena *a, const payment_row *p, const char *intent, int64_t cents, const char **id);

/* Job payments whose hold lapses before `before` while the job is still to be done: ids. */
err_t pay_store_holds_due(arena *a, int64_t before, int limit, db_res **out);
/* The user's current job payments not yet good (FAILED, or PENDING: a request under way)
 * whose job is ACCEPTED, ON_THE_WAY, IN_PROGRESS or COMPLETED: id, job_status. */
err_t pay_store_recoverable(arena *a, const char *user_id, db_res **out);
/* Payments in uncertain states: id, job_id, what ("pending": a request left unsettled since
 * before stale_before; "capture": AUTHORIZED or never charged on a COMPLETED job; "void":
 * AUTHORIZED on a CANCELLED job; "recover": FAILED on a card that is not the customer's saved
 * one, job not cancelled; "release": in the job's history with a hold or money to give back;
 * "reopen": the current payment of a job back to PENDING or QUOTED; each but "pending" of a
 * job last moved before stale_before), job_status; in two results (out[0], out[1]), each of at
 * most limit rows. */
err_t pay_store_uncertain(arena *a, int64_t stale_before, int limit, db_res *out[2]);

/* True when some payment records intent as its PaymentIntent. */
err_t pay_store_knows_intent(const char *intent, bool *known);
/* True when some user holds subscription_id as their current subscription. */
err_t pay_store_holds_subscription(const char *subscription_id, bool *holds);
/* A verified processor event. created: its `created` (epoch s; 0 when absent). refunds: for
 * charge.refunded, the charge's refunds as the processor lists them (nrefunds of them). */
typedef struct pay_event {
  const char *id, *type;
  json_t *object;
  int64_t created;
  const pay_refund *refunds;
  int nrefunds;
  const char *intent_key; /* a dispute event: the key of the request that made its intent (its metadata) */
} pay_event;

/* What applying an event changed, for what follows its transaction. */
typedef struct pay_event_effect {
  bool duplicate;          /* the id was seen before: nothing changed */
  const char *failed;      /* a payment the event made FAILED, or NULL */
  const char *paid;        /* a payment the event made PAID (its receipt is due), or NULL */
  const char *refunded;    /* a payment the event recorded refunds of, or NULL */
  int64_t refunded_cents;  /* how much it recorded */
  int64_t processor_cents; /* of which refunds made at the processor (not the service's own) */
} pay_event_effect;

/* ---- disputes ---- */

/* A disputes row, with its payment's job and kind. Times epoch ms, 0 for NULL. */
typedef struct dispute_row {
  const char *id, *processor_id, *payment_id, *job_id, *status, *reason, *evidence_text, *evidence_files;
  int64_t amount_cents, evidence_due_by, evidence_submitted_at, closed_at, created_at, lost_cents;
  bool funds_withdrawn;
} dispute_row;

/* Whether a processor's dispute status is one of a closed dispute (won, lost, warning_closed). */
bool pay_dispute_closed(const char *status);
err_t pay_store_dispute(arena *a, const char *id, dispute_row *out, bool *found);
/* Records evidence sent for dispute id by staff_id (text, the files' JSON array) and the
 * dispute as the processor answered it (d), with the audit record, in one transaction. */
err_t pay_store_dispute_evidence(const char *id, const char *text, const char *files, const char *staff_id,
                                 const pay_dispute *d, const audit_action *act);
/* A page of disputes (open: not closed; closed; all when which is NULL), newest first, with
 * their job, parties and payment: id, processor_dispute_id, payment_id, job_id, status,
 * reason, amount_cents, evidence_due_by, funds_withdrawn, evidence_submitted_at, closed_at,
 * created_at, service, job_status, customer_id, customer_name, customer_email, provider_id,
 * provider_name, lost_cents, seq. */
extern const db_keyset DISPUTES_KEYSET;
err_t pay_store_disputes(arena *a, const char *which, const db_page *pg, db_res **out);
/* Dispute id as the list shows it (one row, or none). */
err_t pay_store_dispute_listed(arena *a, const char *id, db_res **out);
/* What dispute evidence says of a job: its customer, service, description and completion. */
typedef struct pay_evidence_context {
  const char *customer_name, *customer_email, *service, *description;
  int64_t completed_at; /* epoch ms, 0 when not completed */
} pay_evidence_context;
err_t pay_store_evidence_context(arena *a, const char *job_id, pay_evidence_context *out);
/* The stored files of job_id that may be sent as dispute evidence: key, source ("job",
 * "before", "after" or "message"). */
err_t pay_store_job_files(arena *a, const char *job_id, db_res **out);

/* Deletes the ids of processor events received before before_ms (30 days: Stripe retries an
 * event for 3 days, so an id that old is never delivered again). */
err_t pay_store_prune_webhook_events(int64_t before_ms);

/* Applies a verified processor event once: records its id and runs the change in one
 * transaction. A subscription event older than the last applied to its subscription changes
 * nothing. Strings of *out live in arena a. */
err_t pay_store_apply_event(arena *a, const pay_event *ev, pay_event_effect *out);
/* Writes news in a transaction of its own. */
err_t pay_store_announce(const pay_news *news);

/* ---- the account's part (domain/domain.h) ---- */

/* The export's payments of a customer (account_part's sql), oldest first. */
extern const char *const PAY_EXPORT_SQL[2];
/* forget_in of the users table's billing columns: a customer's erasure ends its premium
 * (is_premium, premium_since, the subscription and its pending subscribe); its processor
 * customer and saved card stay for the ledger. Its payments stay at an erasure; at a deletion
 * they went with its jobs (payments_forget_customer_in). */
err_t pay_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
