/* The payouts domain's declaration (domain/domain.h): its routes, its background work, its
 * live-update kind and its part of an account (a provider's payout account and transfers, which
 * an erasure keeps: the ledger's). */
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_api.h"

static const domain_job jobs[] = {
    {"payout_transfer", po_transfer_from_queue},
    {"payout_reverse", po_reverse_from_queue},
    {"payout_provider", po_provider_from_queue},
    {"payout_due", po_due_from_queue, .period_ms = PO_DUE_PERIOD_MS},
    {0},
};

static const domain_event events[] = {
    {"payout.updated", "Transfer",
     "A transfer of the provider's payouts appeared or changed (status, amount, reversal, dates, failure)"},
    {0},
};

const domain_def payouts_domain = {
    .name = "payouts", .routes = payouts_routes, .jobs = jobs, .events = events, .export_parts = PAYOUTS_EXPORT_PARTS};
