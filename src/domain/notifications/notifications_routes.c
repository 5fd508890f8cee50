/* Routes of /users/me and /providers/me notifications, push tokens and banners. */
#include "domain/notifications/notifications_api.h"
#include "http/paging.h"

static const hs_field token_fields[] = {{"token", F_STRING, F_REQUIRED, LEN(1, 512)}, {0}};
static const hs_schema token_schema = {token_fields};
static const hs_field list_fields[] = {{"unread", F_BOOL}, HS_PAGE_FIELDS, {0}};
static const hs_schema list_query = {list_fields};

const hs_route notifications_routes[] = {
    {HS_POST, "/users/me/push-token", api_push_token, ROLE_USER, &token_schema,
     .summary = "Register the customer's device push token", .response = "Ok"},
    {HS_POST, "/providers/me/push-token", api_push_token, ROLE_PROVIDER, &token_schema,
     .summary = "Register the provider's device push token", .response = "Ok"},
    {HS_GET, "/users/me/notifications", api_notifications_list, ROLE_USER, .query = &list_query,
     .summary = "The last 50 notifications, or any page of them, newest first (unread=true: unread only)",
     .response = "Notification[]"},
    {HS_GET, "/providers/me/notifications", api_notifications_list, ROLE_PROVIDER, .query = &list_query,
     .summary = "The last 50 notifications, or any page of them, newest first (unread=true: unread only)",
     .response = "Notification[]"},
    {HS_POST, "/users/me/notifications/read", api_notifications_read, ROLE_USER, .summary = "Mark all read",
     .response = "Ok"},
    {HS_POST, "/providers/me/notifications/read", api_notifications_read, ROLE_PROVIDER, .summary = "Mark all read",
     .response = "Ok"},
    {HS_POST, "/users/me/notifications/:id/read", api_notification_read, ROLE_USER,
     .summary = "Mark one notification read", .response = "Notification", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_POST, "/providers/me/notifications/:id/read", api_notification_read, ROLE_PROVIDER,
     .summary = "Mark one notification read", .response = "Notification", .errors = ERRORS(ERR_NOT_FOUND)},
    {HS_GET, "/users/me/notification", api_banner_poll, ROLE_USER,
     .summary = "The pending in-app banner, returned once", .response = "Banner?"},
    {HS_GET, "/providers/me/notification", api_banner_poll, ROLE_PROVIDER,
     .summary = "The pending in-app banner, returned once", .response = "Banner?"},
    {0},
};
