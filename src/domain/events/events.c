/* The events domain's declaration (domain/domain.h): its start-up installs the ticket
 * redeemer, starts the hub and registers the hourly pruning of the outbox; its stop ends the
 * hub's threads (the server has closed every stream by then). */
#include "domain/events/events.h"
#include "core/clock.h"
#include "core/log.h"
#include "domain/events/events_api.h"
#include "domain/events/events_hub.h"
#include "domain/events/events_store.h"
#include "ext/queue.h"
#include <stdio.h>

/* Events are kept this long for replay, and an hour more (a reconnect checks their age). */
#define KEEP_MS (DAY_MS + HOUR_MS)

static bool prune(json_t *payload, char err[256]) {
  (void)payload;
  int64_t now = clock_now_ms();
  if (events_store_prune(now - KEEP_MS, now) == ERR_OK) return true;
  snprintf(err, 256, "pruning the events outbox failed");
  return false;
}

static void events_init(void) {
  events_api_init();
  queue_register("events_prune", prune);
  queue_every("events_prune", HOUR_MS);
  events_hub_start();
}

const domain_def events_domain = {
    .name = "events", .routes = events_routes, .init = events_init, .stop = events_hub_stop};
