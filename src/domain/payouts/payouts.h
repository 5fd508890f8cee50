/* Payouts: what providers earn reaches their account at the payment processor, the way
 * platforms on Stripe Connect do it (separate charges and transfers).
 *
 * A provider gets a connected account (POST /providers/me/payout-account, onboarding through
 * the processor's link; GET shows its state, which `account.updated` keeps current). Every job
 * payment or tip captured for a provider becomes a transfer record in the transaction that
 * records the capture: the accepted quote's amount (the platform fee stays with the platform),
 * or the whole tip, due 72 hours after completion (the report window). It is made in the
 * background once due, under an idempotency key written on the record before the processor is
 * asked, when the account is enabled; until then it waits. A report inside the window holds
 * the job's transfers until staff refund it or 7 days passed; a refund reduces (or cancels) a
 * transfer not yet made and reverses the refunded share of one made. The first transfer of a
 * month of Preferred Pro membership carries the month's fee. docs/internals/payments.md has
 * the whole money path. Thread-safe.
 *
 * This domain sits below payments (payments, jobs, providers and staff call it); it reads the
 * payments, jobs, quotes, reports and providers tables and writes only its own. */
#ifndef DOMAIN_PAYOUTS_H
#define DOMAIN_PAYOUTS_H
#include "db/db.h"
#include "domain/domain.h"
#include "http/rowjson.h"
#include <stdbool.h>
#include <stdint.h>

extern const domain_def payouts_domain;

/* The Transfer JSON of a payout_transfers row, as a field table (http/rowjson.h). */
extern const hs_rj_field PAYOUTS_TRANSFER_JSON[];

/* The report window: a job's transfers are due this long after its completion. */
#define PAYOUTS_WINDOW_MS (72LL * 3600 * 1000)
/* A reported job's transfers are held this long after the report, unless refunded first. */
#define PAYOUTS_HOLD_MS (7LL * 24 * 3600 * 1000)
/* The Preferred Pro membership fee, billed from the first transfer of each month. */
#define PAYOUTS_PREMIUM_FEE_CENTS 3900

/* What a provider keeps of earned (its quote amount, or a tip) once refunded of the charged
 * total was given back: earned less the refund's share of it, earned x refunded / charged,
 * rounded to the cent (0 once all was refunded). */
int64_t payouts_earned_after_refunds(int64_t earned, int64_t charged, int64_t refunded);

/* How a provider's premiumBilledMonth follows the fee: write(c, provider_id, "YYYY-MM") inside
 * the transaction that bills the month. The providers domain owns that column and registers
 * the writer at start-up (a transfer is never made before it did). */
typedef db_rc (*payouts_billed_writer)(db_conn *c, const char *provider_id, const char *month);
void payouts_follow_premium(payouts_billed_writer write);

/* On c, inside the transaction that records payment payment_id PAID (a current job payment or
 * tip of a job with a provider): records its transfer (once per payment; nothing for other
 * payments), held when the job was reported, waiting when the provider has no enabled account. */
db_rc payouts_captured_in(db_conn *c, const char *payment_id);
/* On c, inside the transaction that adds a refund (or a lost dispute) to payment payment_id:
 * the transfer's amount follows (payouts_earned_after_refunds of what the provider bears: the
 * refunds it shares, prorata, and what lost disputes took); one not made yet is reduced,
 * cancelled at 0, and released from a report's hold; of one made, the refunded share is
 * reversed in the background, and what the processor will not reverse becomes the provider's
 * negative balance, netted from its next transfers. */
db_rc payouts_refunded_in(db_conn *c, const char *payment_id);
/* On c, inside the transaction that records a dispute of job_id opened (open) or closed: while
 * one is open the job's transfers not made yet are held, with no lapse; once none is, they go
 * out as scheduled (or stay held while an open report's hold runs). */
db_rc payouts_dispute_in(db_conn *c, const char *job_id, bool open);
/* On c, inside the transaction that resolves job_id's report by releasing its money: its
 * transfers held by the report go out as scheduled (not those an open dispute holds). */
db_rc payouts_release_job_in(db_conn *c, const char *job_id);
/* What a provider owes the platform, in cents (0 when nothing): Preferred Pro fees billed and
 * not yet taken from a transfer, and refunded or disputed shares the processor would not
 * reverse, less what transfers have netted. Its negative is the provider's balance. */
err_t payouts_owed(arena *a, const char *provider_id, int64_t *owed_cents, int64_t *fees_owed_cents);
/* The same read, to run with others in one round trip: one row, owed_cents and fees_owed_cents. */
db_read payouts_read_owed(arena *a, const char *provider_id);
/* How many providers owe the platform something, and how much in all (cents): for
 * `marketplace payments reconcile`, which reports it. */
err_t payouts_owing(int *providers, int64_t *owed_cents);
/* On c, inside the transaction that deletes customer_id's records (GODMODE: its payments go):
 * the transfers of its payments not made yet are cancelled, so no money goes out for them. */
db_rc payouts_forget_customer_in(db_conn *c, const char *customer_id);
/* On c, inside the transaction that records a report of job_id at reported_at: its transfers
 * not made yet are held until reported_at + PAYOUTS_HOLD_MS; *held_cents: how much they hold. */
db_rc payouts_hold_job_in(db_conn *c, const char *job_id, int64_t reported_at, int64_t *held_cents);
/* The job's job and tip transfers, oldest first (to run with other reads: db_query_all): id,
 * kind, amount_cents, status, hold_until, available_at. */
db_read payouts_read_job_transfers(arena *a, const char *job_id);
/* The processor says account_id changed (account.updated): its state is asked of the
 * processor (events may come in any order) and recorded; an account enabled lets its
 * provider's waiting transfers go out, one no longer enabled makes them wait. ERR_OK also for
 * an account nobody holds; ERR_UNAVAILABLE when the processor could not be asked. */
err_t payouts_account_changed(const char *account_id);
/* Settles transfers in uncertain states: requests left unanswered for min_age_ms or more (0:
 * all) are looked up at the processor by their key before anything is repeated, refunded
 * shares not yet reversed are reversed, and captured payments without a transfer get one. Logs
 * each correction; counts what it looked at and what it changed. For `payments reconcile`. */
err_t payouts_reconcile(int64_t min_age_ms, int *checked, int *corrected);

/* Whether a transfer in status is money the provider is still to be paid (scheduled,
 * waiting_for_account, on_hold, failed) or was paid (paid, reversed). */
bool payouts_unpaid(const char *status);
bool payouts_paid(const char *status);
/* The provider's job and tip transfers, for figures: kind, status, amount_cents (what it earns
 * now), created_at (its capture), paid_at, service (of its job) and netted_cents (the fee and
 * balance it paid off). */
err_t payouts_provider_records(arena *a, const char *provider_id, db_res **out);
/* The same read, to run with others in one round trip (db_query_all). */
db_read payouts_read_provider_records(arena *a, const char *provider_id);

#endif
