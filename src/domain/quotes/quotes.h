/* Quotes: providers price open jobs, the customer accepts one (the job is assigned, the
 * others rejected, the card authorized), the market rate, a job's quotes for its owner. */
#ifndef DOMAIN_QUOTES_H
#define DOMAIN_QUOTES_H
#include "core/ids.h"
#include "db/db.h"
#include "domain/domain.h"
#include "http/http.h"
#include <stdbool.h>
#include <stdint.h>

extern const domain_def quotes_domain;

/* The platform fee of a quote amount: 18%, rounded to the cent. */
int64_t quotes_platform_fee(int64_t amount_cents);

/* True when a quote of amount_cents can be paid: its customer total (the amount plus the 18%
 * fee, computed exactly, before the fee is rounded to the cent) is at least the processor's
 * smallest charge, 0.50. So 0.43 is the smallest quote; 0.42 (0.4956) is refused. */
bool quotes_total_chargeable(int64_t amount_cents);

/* What quoting a job came to (POST /quotes's rules). */
typedef enum {
  QUOTE_CREATED,
  QUOTE_TOO_SMALL,  /* a total the processor cannot charge (quotes_total_chargeable): 400 */
  QUOTE_UNVERIFIED, /* no headshot or a licence side missing: 400 verification_required */
  QUOTE_NO_JOB,     /* no such job, or one outside the provider's services and ZIPs: 404 */
  QUOTE_NOT_OPEN,   /* the job is no longer PENDING or QUOTED: 409 */
  QUOTE_DUPLICATE,  /* this provider already quoted the job: 409 */
  QUOTE_FAILED,     /* storage failed: 500 */
} quote_outcome;

typedef struct quote_request {
  const char *provider_id, *job_id;
  const char *note, *scheduled_at; /* optional (NULL); scheduled_at is ISO 8601 */
  int64_t amount_cents;            /* at least 1 */
} quote_request;

/* Quotes a job as POST /quotes does: checks verification, visibility and the job's status,
 * then in one transaction inserts the quote (platform fee 18%), moves the job to QUOTED and
 * writes the customer's email and notification. On QUOTE_CREATED id holds the new quote's
 * id. Temporary memory comes from a. Thread-safe; concurrent calls for one provider and job
 * create one quote (a unique index decides). */
quote_outcome quotes_submit(arena *a, const quote_request *q, char id[ID_LEN + 1]);

/* Whether a provider is verified, the rule of quoting: a headshot (headshots: the stored JSON
 * array of keys) and both sides of its licence (the stored keys, NULL when missing). */
bool quotes_provider_verified(const char *headshots, const char *id_doc_front, const char *id_doc_back);

/* Fails req with 400 verification_required (QUOTE_UNVERIFIED's answer). */
err_t quotes_fail_unverified(hs_req *req);

/* A service's market: rate_cents is GET /quotes/market-rate's figure (the median of the last
 * 50 accepted quotes' amounts, to the nearest 5 dollars), mean_cents their mean, samples how
 * many there were (0: known false, the others 0). */
typedef struct quote_market {
  bool known;
  int64_t rate_cents, mean_cents;
  int samples;
} quote_market;
err_t quotes_market(arena *a, const char *service, quote_market *out);

#endif
