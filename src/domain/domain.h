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
#include "http/http.h"
#include <stddef.h>

typedef struct domain_def {
  const char *name;
  const hs_route *routes; /* its rows, ended by a row of zeros (method 0); NULL: none */
  /* At start-up of `serve` and `demo`, in list order, once the database, the password pool,
   * mail and the payment processor are ready and before the queue workers and the listener
   * start: registers queue kinds, periodic tasks, HTTP hooks, caches. NULL: nothing to do. */
  void (*init)(void);
  /* At shutdown, in reverse list order, after the listener and the queue workers stopped and
   * before the database closes. NULL: nothing to do. */
  void (*stop)(void);
} domain_def;

#endif
