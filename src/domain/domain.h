/* A domain is the unit of the service: one declaration that start-up and routing both iterate
 * (src/domains.c lists them), like Redis's command table, so adding a domain is one line there.
 *
 * Every domain has the same rooms (docs/architecture.md):
 *   <d>.h          what other domains may call, and `extern const domain_def <d>_domain;`
 *   <d>_routes.c   its route rows and their schemas, nothing else
 *   <d>_api.c ...  handlers: read the validated request, call the store, answer
 *   <d>_store.c    the only files with SQL and transactions (several *_store.c where a domain
 *                  has several parts)
 *   <d>.c          the domain's declaration and its start-up and shutdown work
 * A table has one owning store; another domain changes its rows through that store's public
 * functions. A domain never includes another domain's store or api header, and domains do not
 * call each other in circles (scripts/check_shape.py fails `make test` when they do). */
#ifndef DOMAIN_DOMAIN_H
#define DOMAIN_DOMAIN_H
#include "ext/queue.h"
#include "http/http.h"
#include "http/openapi.h"
#include <stddef.h>
#include <stdint.h>

/* A kind of background work the domain runs (ext/queue.h): queued by the domain's own changes
 * (queue_enqueue in their transactions), or, with a period, once per period by the clock. */
typedef enum { JOB_LIGHT, JOB_HEAVY } job_weight; /* heavy: document recognition's workers */
typedef struct domain_job {
  const char *kind;   /* job_queue.kind, e.g. "payment_capture" */
  queue_handler run;  /* one unit of work; true when done, false to retry */
  job_weight weight;  /* JOB_LIGHT (default) or JOB_HEAVY */
  int64_t period_ms;  /* > 0: a periodic task (queue_every); 0: queued by changes */
} domain_job;

/* An event kind the domain writes to the live-updates outbox (events_emit_in), as the OpenAPI
 * document lists it (http/openapi.h): {"quote.created", "Quote", "who receives it"}. */
typedef hs_stream_event domain_event;

typedef struct domain_def {
  const char *name;
  const hs_route *routes;     /* its rows, ended by a row of zeros (method 0); NULL: none */
  const domain_job *jobs;     /* its background work, ended by a row with kind NULL; NULL: none */
  const domain_event *events; /* its live-update kinds, ended by a row with kind NULL; NULL: none */
  const hs_hooks *hooks;      /* its request hooks (http.h), added in list order; NULL: none */
  /* At start-up of `serve` and `demo`, in list order, once the database, the password pool,
   * mail and the payment processor are ready, after the jobs and hooks above were registered
   * and before the queue workers and the listener start: caches, threads, wiring to other
   * domains. NULL: nothing to do. */
  void (*init)(void);
  /* At shutdown, in reverse list order, after the listener and the queue workers stopped and
   * before the database closes. NULL: nothing to do. */
  void (*stop)(void);
} domain_def;

#endif
