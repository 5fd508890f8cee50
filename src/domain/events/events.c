/* The events domain's declaration (domain/domain.h): its routes, the hourly pruning of the
 * outbox, the tickets' redeemer; its start-up starts the hub and its stop ends the hub's threads
 * (the server has closed every stream by then); an erased account's events go with it. Its
 * hooks turn a ticket (POST /events/ticket) or the session cookie (POST /events/session) into
 * the claims of the token it stands for. The
 * kinds it carries are the other domains' (their `events` rows); its own are the stream's
 * control events (events.schema.json). */
#include "domain/events/events.h"
#include "core/clock.h"
#include "core/config.h"
#include "core/log.h"
#include "domain/events/events_api.h"
#include "domain/events/events_hub.h"
#include "domain/events/events_store.h"
#include "ext/queue.h"
#include <stdio.h>

/* Events are kept RETAIN_EVENTS (48 hours: 24 hours past the replay window; a reconnect checks
 * their age, so keeping them longer replays nothing older than the window). */

static bool prune(json_t *payload, char err[256]) {
  (void)payload;
  int64_t now = clock_now_ms();
  if (events_store_prune(now - CFG.retain.events, now) == ERR_OK) return true;
  snprintf(err, 256, "pruning the events outbox failed");
  return false;
}

static const domain_job jobs[] = {{"events_prune", prune, .period_from = &CFG.retain.sweep}, {0}};

static const hs_hooks hooks = {.redeem_ticket = events_redeem_ticket,
                               .session_cookie = EVENTS_SESSION_COOKIE,
                               .redeem_cookie = events_redeem_session};

const domain_def events_domain = {.name = "events",
                                  .routes = events_routes,
                                  .jobs = jobs,
                                  .hooks = &hooks,
                                  .init = events_hub_start,
                                  .stop = events_hub_stop,
                                  .forget_in = events_forget_account_in};
