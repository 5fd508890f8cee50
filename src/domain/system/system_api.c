/* /health answers without touching the database: it says the process serves requests. /ready
 * says whether it can serve them now: the database answers within a second and its
 * migrations are current (a load balancer sends traffic only to ready instances).
 * /__test/... exist only when APP_ENV=test (the route flag makes them 404 elsewhere). */
#include "domain/system/system_api.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/jsonx.h"
#include "core/util.h"
#include "db/db.h"
#include "ext/mail.h"
#include "ext/password.h"
#include "ext/payments.h"
#include "ext/queue.h"
#include "http/idempotency.h"
#include "http/metrics.h"
#include "http/ratelimit.h"
#include "http/router.h"
#include "http/server.h"
#include <stdio.h>
#include <string.h>

err_t api_health(hs_req *req) { return hs_ok_pack(req, "{s:s}", "status", "ok"); }

/* Prometheus metrics for loopback callers or the METRICS_TOKEN bearer; 404 for anyone else, so
 * the route does not show from outside. */
err_t api_metrics(hs_req *req) {
  if (!hs_metrics_allowed(req)) return hs_fail(req, ERR_NOT_FOUND, NULL);
  size_t len;
  char *text = hs_metrics_render(&len);
  req->res_cache_control = "no-store";
  return hs_reply_file(req, -1, text, len, "text/plain; version=0.0.4; charset=utf-8");
}

#define READY_TIMEOUT_MS 1000

/* Ready: the database answers with its migrations current, and the payment processor has not
 * refused the service's key (a revoked or restricted key stops every payment: an operator's
 * matter, told here, in the log and in the metrics). */
err_t api_ready(hs_req *req) {
  char reason[128];
  bool ready = db_ready(READY_TIMEOUT_MS, reason);
  if (ready && payments_unauthorized())
    ready = false, snprintf(reason, sizeof reason, "payment processor: unauthorized");
  if (ready) return hs_ok_pack(req, "{s:s}", "status", "ready");
  jw *w = hs_jw(req, 192);
  jw_pack(w, "{s:s,s:s}", "status", "unavailable", "reason", reason);
  return hs_reply_jw(req, 503, w);
}

err_t api_test_clock(hs_req *req) {
  json_t *freeze = json_object_get(req->body, "freeze");
  if (freeze) clock_freeze(json_is_true(freeze));
  clock_advance_ms(json_integer_value(json_object_get(req->body, "advanceMs")));
  return hs_ok_pack(req, "{s:T}", "now", clock_now_ms());
}

/* Every row of the route table with how often it answered and how often successfully. */
err_t api_test_routes(hs_req *req) {
  size_t n;
  const hs_route *routes = hs_router_routes(&n);
  jw *w = hs_jw(req, 96 * (n + 1));
  jw_obj(w);
  jw_key(w, "routes");
  jw_arr(w);
  for (size_t i = 0; i < n; i++) {
    long hits, ok;
    hs_router_counts(i, &hits, &ok);
    jw_pack(w, "{s:s,s:s,s:I,s:I}", "method", hs_method_name(routes[i].method), "path", routes[i].path, "hits",
            (int64_t)hits, "ok", (int64_t)ok);
  }
  jw_arr_end(w);
  jw_obj_end(w);
  return hs_ok_jw(req, w);
}

/* The background work due now and running (of ?lane=general or heavy, else both), so a test
 * can wait until the queue is idle before asserting that something was not sent. */
err_t api_test_queue(hs_req *req) {
  const char *lane = hs_query_str(req, "lane");
  queue_lanes lanes = !lane ? QUEUE_LANES_ALL : !strcmp(lane, "heavy") ? QUEUE_LANES_HEAVY : QUEUE_LANES_GENERAL;
  int64_t ready, running;
  if (!queue_depth(lanes, &ready, &running)) return ERR_INTERNAL;
  return hs_ok_pack(req, "{s:I,s:I}", "ready", (int64_t)ready, "running", (int64_t)running);
}

/* What the HTTP server is doing, so a test can wait until a request it sent is in flight (or
 * its handler runs, or the hashing pool is full) instead of sleeping. This request itself is
 * not counted. */
err_t api_test_load(hs_req *req) {
  int in_flight, running;
  hs_server_load(&in_flight, &running);
  return hs_ok_pack(req, "{s:i,s:i,s:b}", "inFlight", in_flight - 1, "handlersRunning", running, "hashingPoolFull",
                    password_pool_full());
}

/* The rows of the layers below the domains that grow with time, each kept its RETAIN_* period
 * (docs/operations.md, "Retention"): rate-limit counters, idempotency keys, finished background
 * work, and the development mail outbox's files. */
bool system_housekeeping(json_t *payload, char err[256]) {
  (void)payload;
  int64_t now = clock_now_ms();
  if (hs_rate_limit_prune(now - CFG.retain.rate_limits) != ERR_OK || hs_idem_prune(now) != ERR_OK ||
      queue_prune_done(now - CFG.retain.queue) != DB_OK) {
    snprintf(err, 256, "cannot delete expired rows");
    return false;
  }
  mail_prune_outbox(CFG.retain.mail);
  return true;
}
