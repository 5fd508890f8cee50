/* The messages domain's declaration (domain/domain.h). */
#include "domain/messages/messages.h"
#include "domain/messages/messages_api.h"

const domain_def messages_domain = {.name = "messages", .routes = messages_routes};
