/* Payments: the customer's saved card and premium subscription (/payments/...), processor
 * webhooks (POST /webhooks), and the payment operations of the job flow.
 *
 * The job operations write the Payment record of a job (kind "job": AUTHORIZED on
 * acceptance or FAILED, PAID on completion, CANCELED when an accepted job is cancelled) and
 * of its tip. They call the processor with idempotency keys derived from the Payment id, so
 * running one twice never moves money twice. Thread-safe. */
#ifndef DOMAIN_PAYMENTS_H
#define DOMAIN_PAYMENTS_H
#include "db/db.h"
#include "http/http.h"
#include <stdint.h>

extern const hs_route PAYMENTS_ROUTES[];
extern const size_t PAYMENTS_ROUTES_LEN;

/* Registers the queue handler that retries captures the processor could not take. */
void payments_domain_init(void);

/* Authorizes cents on user's saved card for job (manual capture, off-session) and records the
 * Payment: AUTHORIZED, or FAILED (declined, no saved card). A decline is not an error: the
 * acceptance that calls this succeeds either way. ERR_CONFLICT when the job already has a
 * payment; ERR_INTERNAL when nothing could be recorded. */
err_t payments_authorize_job(const char *job_id, const char *user_id, int64_t cents);
/* Queues on c, inside the transaction that accepts a quote, the check that the job's Payment
 * follows its status, due PAYMENT_FOLLOW_UP_MS later: when the process died between that
 * commit and the authorization that follows it, the check authorizes the accepted quote's
 * total (same idempotency key, so at most one hold) and records the Payment; an AUTHORIZED
 * Payment of a job completed or cancelled since is captured or voided. Otherwise it does
 * nothing. */
#define PAYMENT_FOLLOW_UP_MS (2 * 60 * 1000)
db_rc payments_follow_up(db_conn *c, const char *job_id);
/* Captures the job's AUTHORIZED payment (PAID). No payment, or one not AUTHORIZED: nothing
 * to do, ERR_OK. When the processor is unreachable the capture is queued and retried. */
err_t payments_capture_job(const char *job_id);
/* Voids the job's AUTHORIZED payment (CANCELED); otherwise nothing to do. */
err_t payments_void_job(const char *job_id);
/* Charges a tip at once on user's saved card. ERR_BAD_REQUEST without a saved card,
 * ERR_PAYMENT_REQUIRED when declined (message in msg, 256 bytes), ERR_CONFLICT when the job
 * was already tipped, ERR_UNAVAILABLE when the processor did not answer (the claim is kept,
 * and a retry repeats the same processor request, so the tip is charged at most once). */
err_t payments_charge_tip(const char *job_id, const char *user_id, int64_t cents, char msg[256]);
/* The job's payment as `{ id, status, amount, processorPaymentIntentId }`, or JSON null. */
json_t *payments_job_json(const char *job_id, const char *kind);

#endif
