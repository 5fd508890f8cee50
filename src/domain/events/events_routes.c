/* Routes of the live updates: the stream, its tickets and its browser session. */
#include "domain/events/events_api.h"

#define STREAM_ROLES (ROLE_USER | ROLE_PROVIDER | ROLE_STAFF)

static const hs_field stream_fields[] = {
    {"ticket", F_STRING, 0, LEN(1, 128)},
    {"lastEventId", F_STRING, 0, LEN(1, 32)},
    {0},
};
static const hs_schema stream_query = {stream_fields};

const hs_route events_routes[] = {
    {HS_GET, "/events", api_events_stream, STREAM_ROLES, .query = &stream_query, .flags = ROUTE_TICKET | ROUTE_COOKIE,
     .summary = "The caller's live updates (Server-Sent Events)", .response = "text/event-stream",
     .stream_schema = "StreamEvent"},
    {HS_POST, "/events/ticket", api_events_ticket, STREAM_ROLES, .flags = ROUTE_SECRETS,
     .summary = "A single-use ticket that opens GET /events without a header", .response = "EventTicket"},
    {HS_POST, "/events/session", api_events_session, STREAM_ROLES, .flags = ROUTE_SECRETS,
     .summary = "A cookie that opens GET /events from a browser for as long as the token is valid",
     .response = "EventSession"},
    {0},
};
