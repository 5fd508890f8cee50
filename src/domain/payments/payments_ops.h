/* The request machinery of the payments domain (payments_jobs.c), shared with the refunds and
 * the job's payment history (payments_refunds.c). Internal to the domain.
 *
 * A request is claimed on its payment row (op, key, card, amount) before the processor is
 * called, carried out, and its outcome recorded only while the row still names it. These
 * functions take a row read just before; ERR_UNAVAILABLE always means "not known yet, or
 * someone else carries it: try again later". Thread-safe. */
#ifndef DOMAIN_PAYMENTS_OPS_H
#define DOMAIN_PAYMENTS_OPS_H
#include "domain/payments/payments_store.h"

/* Carries out p's pending request (claimed or taken over by the caller) and records what it
 * came to; settling: its first carrier's answer was lost, so the processor is asked first. */
err_t pay_run(arena *a, payment_row *p, bool settling);
/* Reads payment id again and carries out its request (claimed or taken over just now): the
 * payments' db_lease_run. */
err_t pay_run_claimed(arena *a, const char *id, bool settling);
/* Starts op on payment p (its status as read, nothing pending) as a new request (a new key;
 * capture and void: one key per intent) with method (NULL keeps the recorded card) for cents
 * (0 keeps the amount) and carries it out. */
err_t pay_attempt(arena *a, const payment_row *p, const char *op, const char *method, int64_t cents);
/* Leaves p's pending request to be settled later (its outcome is not known): ERR_UNAVAILABLE. */
err_t pay_leave(const payment_row *p);
/* Takes over and settles p's request when it was left unsettled before stale_before (its lease
 * over: db_lease_over(), or the reconciliation's older bound). */
err_t pay_take_over(arena *a, const payment_row *p, int64_t stale_before);
/* Queues background work kind with payload { field: id }; false when it could not be. */
bool pay_queue(const char *kind, const char *field, const char *id);
/* The customer's receipt of p, PAID (recorded by a processor event): email, in a's memory. */
const pay_news *pay_receipt_news(arena *a, const payment_row *p);
/* The customer (email) and the people of the job told about a change of p. */
const pay_news *pay_refund_news(arena *a, const payment_row *p, int64_t cents, const char *reason);

/* payments_refunds.c: carries out p's pending refund (pay_run's part for op "refund"). */
err_t pay_run_refund(arena *a, const payment_row *p, bool settling);
/* Gives back what payment id still holds once it is in its job's history: a hold voided,
 * captured money refunded (after its request under way, if any, settled). ERR_OK when done or
 * nothing is left; ERR_UNAVAILABLE to be tried again. */
err_t pay_release_one(const char *payment_id);
/* A charge made by p's request that p does not record (another charge was recorded first): it
 * is recorded in the job's history and refunded in full. */
void pay_refund_duplicate(arena *a, const payment_row *p, const char *intent, int64_t cents);
/* payments_webhook.c: applies a processor event (verified, or the simulated processor's own)
 * once; *duplicate when its id was seen before. ERR_BAD_REQUEST when it is not an event,
 * ERR_UNAVAILABLE when the processor had to be asked and could not be. */
err_t payments_apply_event(arena *a, json_t *event, bool *duplicate);

/* The background work of payments (payments.c lists it): a payment's settling, capture, void,
 * a hold's cancellation, an unanswered request's recovery and follow-up (payments_jobs.c), the
 * hourly renewal of lapsing holds and the reconciliation, a job's payments released
 * (payments_refunds.c), a processor event applied (payments_webhook.c). */
#define PAY_HOLDS_PERIOD_MS HOUR_MS
#define PAY_RECONCILE_PERIOD_MS (15LL * 60 * 1000)
/* (each a queue handler) */
bool pay_settle_from_queue(json_t *payload, char err[256]);
bool pay_capture_from_queue(json_t *payload, char err[256]);
bool pay_void_from_queue(json_t *payload, char err[256]);
bool pay_cancel_hold_from_queue(json_t *payload, char err[256]);
bool pay_recover_from_queue(json_t *payload, char err[256]);
bool pay_renew_holds_from_queue(json_t *payload, char err[256]);
bool pay_reconcile_from_queue(json_t *payload, char err[256]);
bool pay_follow_up_from_queue(json_t *payload, char err[256]);
bool pay_release_from_queue(json_t *payload, char err[256]);
bool pay_event_from_queue(json_t *payload, char err[256]);

#endif
