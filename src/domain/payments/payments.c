/* The payments domain's declaration (domain/domain.h): its routes, its background work, its
 * live-update kind and its part of an account (a customer's payments and billing). */
#include "domain/payments/payments.h"
#include "core/clock.h"
#include "domain/payments/payments_api.h"
#include "domain/payments/payments_ops.h"
#include "domain/payments/payments_store.h"
#include <stdio.h>

/* Processor event ids are kept 30 days (docs/operations.md, "Retention"). */
#define WEBHOOK_EVENTS_KEPT_MS (30 * DAY_MS)

static bool prune_webhook_events(json_t *payload, char err[256]) {
  (void)payload;
  if (pay_store_prune_webhook_events(clock_now_ms() - WEBHOOK_EVENTS_KEPT_MS) == ERR_OK) return true;
  snprintf(err, 256, "cannot delete old webhook event ids");
  return false;
}

static const domain_job jobs[] = {
    {"payment_follow_up", pay_follow_up_from_queue},
    {"payment_settle", pay_settle_from_queue},
    {"payment_capture", pay_capture_from_queue},
    {"payment_void", pay_void_from_queue},
    {"payment_cancel_hold", pay_cancel_hold_from_queue},
    {"payment_recover", pay_recover_from_queue},
    {"payment_release", pay_release_from_queue},
    {"payment_event", pay_event_from_queue},
    {"payment_holds", pay_renew_holds_from_queue, .period_ms = PAY_HOLDS_PERIOD_MS},
    {"payment_reconcile", pay_reconcile_from_queue, .period_ms = PAY_RECONCILE_PERIOD_MS},
    {"webhook_events_prune", prune_webhook_events, .period_ms = DAY_MS},
    {0},
};

static const domain_event events[] = {
    {"payment.updated", "PaymentUpdated", "The payment of a job the account may read changed"},
    {0},
};

const domain_def payments_domain = {.name = "payments",
                                    .routes = payments_routes,
                                    .jobs = jobs,
                                    .events = events,
                                    .export_parts = PAYMENTS_EXPORT_PARTS,
                                    .forget_in = pay_store_forget_in};
