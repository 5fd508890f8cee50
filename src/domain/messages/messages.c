/* The messages domain's declaration (domain/domain.h): its routes, its live-update kind and
 * its part of an account. */
#include "domain/messages/messages.h"
#include "domain/messages/messages_api.h"
#include "domain/messages/messages_store.h"

static const domain_event events[] = {
    {"message.created", "MessageCreated", "A message in one of the account's threads (its own included)"}, {0}};

const domain_def messages_domain = {.name = "messages",
                                    .routes = messages_routes,
                                    .events = events,
                                    .export_in = messages_export_in,
                                    .forget_in = messages_store_forget_in};
