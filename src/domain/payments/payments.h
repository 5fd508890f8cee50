/* Payments: the customer's saved card and premium subscription (/payments/...), processor
 * webhooks (POST /webhooks; a payout account's account.updated is handed to payouts), refunds
 * (POST /staff/payments/:jobId/refund), and the payment operations of the job flow. What a
 * capture earns a provider, and what a refund takes back of it, follows in the same transaction
 * as a transfer record (domain/payouts/payouts.h).
 *
 * The job operations write the Payment record of a job (kind "job": AUTHORIZED on
 * acceptance or FAILED, PAID on completion, CANCELED when an accepted job is cancelled,
 * REFUNDED once all of it was given back) and of its tip (kind "tip"). Each processor request
 * is recorded with its idempotency key before it is made, so repeating one never moves money
 * twice, and one whose answer was lost is settled by asking the processor (the payment reads
 * PENDING meanwhile). A job that goes back to PENDING moves its payments to its history and
 * gets its money back. docs/internals/payments.md has the states and every move between
 * them. Thread-safe. */
#ifndef DOMAIN_PAYMENTS_H
#define DOMAIN_PAYMENTS_H
#include "db/db.h"
#include "domain/domain.h"
#include "http/http.h"
#include "http/rowjson.h"
#include <stdint.h>

extern const domain_def payments_domain;

/* How a job's tipAmount follows its tip payment: write(c, job_id, cents) inside the payment's
 * transaction when the tip is PAID, with cents -1 when it goes to the job's history. The jobs
 * domain owns that column and registers the writer (jobs_wire_payments), so payments needs
 * no call into jobs. Call before any payment work runs (serve, and `payments reconcile`). */
typedef db_rc (*payments_tip_writer)(db_conn *c, const char *job_id, int64_t cents);
void payments_follow_tips(payments_tip_writer write);

/* The processor's smallest charge, in cents (Stripe's 0.50 USD). */
#define PAYMENTS_MIN_CHARGE_CENTS 50

/* Authorizes cents on user's saved card for job (manual capture, off-session) and records the
 * Payment: AUTHORIZED, or FAILED with its reason (declined, no saved card; the customer is
 * emailed and notified, the provider notified). A decline is not an error: the acceptance
 * that calls this succeeds either way. An unanswered request is settled in the background.
 * ERR_CONFLICT when the job already has a payment; ERR_INTERNAL when nothing was recorded. */
err_t payments_authorize_job(const char *job_id, const char *user_id, int64_t cents);
/* Queues on c, inside the transaction that accepts a quote, a check due PAYMENT_FOLLOW_UP_MS
 * later: when the process died between that commit and the authorization that follows it (so
 * the job has no Payment at all), the check authorizes the accepted quote's total as the
 * acceptance would have (same idempotency key, so at most one hold). Otherwise it does
 * nothing; what happens to a Payment once recorded is payments_reconcile's. */
#define PAYMENT_FOLLOW_UP_MS (2 * 60 * 1000)
db_rc payments_follow_up(db_conn *c, const char *job_id);
/* Captures the job's live authorization (PAID); without one (FAILED, or the hold lapsed) it
 * charges the accepted total to the saved card, and a refusal is recorded and told as a
 * failure. Whatever cannot be done now is queued and retried. ERR_OK when done, nothing to
 * do, or queued; ERR_INTERNAL only when it could be neither read nor queued (the periodic
 * reconciliation still finds it). */
err_t payments_capture_job(const char *job_id);
/* Voids the job's live authorization (CANCELED); otherwise nothing to do. Queued and retried
 * when it cannot be done now; ERR_INTERNAL as for the capture. */
err_t payments_void_job(const char *job_id);
/* Charges a tip at once on user's saved card. *cents is the amount asked; on success it is
 * the amount charged (a retried tip whose first answer was lost is settled as that first
 * request: its card, amount and key). ERR_BAD_REQUEST without a saved card,
 * ERR_PAYMENT_REQUIRED when declined (message in msg, 256 bytes; the customer may try again),
 * ERR_CONFLICT when the job was already tipped or its tip is being charged, ERR_UNAVAILABLE
 * when the processor did not answer (the request is kept and settled later, or by the next
 * tip, so the tip is charged at most once). */
err_t payments_charge_tip(const char *job_id, const char *user_id, int64_t *cents, char msg[256]);
/* Sets the customer's premium subscription to end with its current period at the processor,
 * as POST /payments/premium/cancel does (no further charge), and records that; nothing to do
 * without a subscription, or when it is set to end already or gone at the processor. For the
 * owner's deletion of the account, before its rows are erased. ERR_UNAVAILABLE when the
 * processor did not answer (nothing changed). */
err_t payments_end_premium(const char *user_id);
/* Tells the customer (email and notification) and the provider (notification) that the job
 * payment payment_id failed, as recorded by a processor event. Failures are logged. */
void payments_tell_failure(const char *payment_id);
/* The Payment JSON `{ id, status, amount, processorPaymentIntentId, holdExpiresAt,
 * failureReason, refundedAmount, dispute }` of a payments row, as a field table
 * (http/rowjson.h): the one definition, which answers that join the payments table bind to its
 * columns. */
extern const hs_rj_field PAYMENTS_JSON[];
/* A payments row as its customer's export shows it `{ id, jobId, kind, status, amount,
 * refundedAmount, processorPaymentIntentId, failureReason, releasedAt, createdAt, updatedAt }`
 * (staff see these members and more). */
extern const hs_rj_field PAYMENTS_ROW_JSON[];
/* A staff refund (POST /staff/payments/:jobId/refund): of job_id's payment (target "job"), its
 * tip ("tip") or both ("all"); cents of it (0: all that is left; not with "all"); who bears it
 * (provider_share "prorata" or "none"); key: the refund's own key stem, for a caller whose
 * retries must find the same refund (a report's resolution), or NULL to take it from the
 * request's Idempotency-Key. */
typedef struct payments_refund_ask {
  const char *job_id, *target, *reason, *provider_share, *key;
  int64_t cents;
} payments_refund_ask;
/* Refunds as asked, by the staff member of req, each refund audited (payment.refund). On
 * success the RefundResult is written to answer (a value: the caller places it); otherwise the request has failed
 * (hs_fail: 404 nothing captured, 409 refund_pending / disputed / nothing left / refused, 503
 * processor away: the refund is settled in the background) and the error is returned. */
err_t payments_staff_refund(hs_req *req, const payments_refund_ask *ask, jw *answer);
/* Moves the current payments of every job assigned to provider_id that is not cancelled to
 * their jobs' history, on c, inside the transaction that returns those jobs to PENDING; what
 * they hold is given back after the commit (holds voided, captured money and tips refunded),
 * in the background, and the next acceptance of each job authorizes afresh. */
db_rc payments_release_provider_jobs_in(db_conn *c, const char *provider_id);
/* On c, inside the transaction that deletes customer_id's account (GODMODE), before its jobs
 * go: the transfers of its payments not made yet are cancelled (payouts_forget_customer_in),
 * then its payments and those of its jobs go (nothing was paid for them). */
db_rc payments_forget_customer_in(db_conn *c, const char *customer_id);
/* Compares the payments in uncertain states with the processor and settles them: requests
 * left unanswered for min_age_ms or more, and of jobs last moved min_age_ms ago or more
 * (sooner, the request that moved the job is still at it): holds of completed or cancelled
 * jobs, completed jobs never charged, failed payments whose card is no longer the customer's
 * saved one, and money still held by payments of a job's history; then the transfers to
 * providers likewise (payouts_reconcile). Logs each correction. For the periodic task and
 * `marketplace payments reconcile`; counts what it looked at and what it changed, payments and
 * transfers. */
err_t payments_reconcile(int64_t min_age_ms, int *checked, int *corrected);

#endif
