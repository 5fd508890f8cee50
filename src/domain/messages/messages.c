/* The messages domain's declaration (domain/domain.h): its routes and its live-update kind. */
#include "domain/messages/messages.h"
#include "domain/messages/messages_api.h"

static const domain_event events[] = {
    {"message.created", "MessageCreated", "A message in one of the account's threads (its own included)"}, {0}};

const domain_def messages_domain = {.name = "messages", .routes = messages_routes, .events = events};
