/* Routes of /users/me and /providers/me notifications, push tokens and banners. */
#include "domain/notifications/notifications_api.h"
#include "http/paging.h"

static const hs_field token_fields[] = {
    {"token", F_STRING, F_REQUIRED, LEN(1, 512)},
    {"deviceId", F_STRING, 0, LEN(1, PUSH_DEVICE_ID_MAX)},
    {0},
};
static const hs_schema token_schema = {token_fields};
static const hs_field list_fields[] = {{"unread", F_BOOL}, HS_PAGE_FIELDS, {0}};
static const hs_schema list_query = {list_fields};

const hs_route notifications_routes[] = {
    {HS_POST, "/users/me/push-token", api_push_token, ROLE_USER, &token_schema,
     .summary = "Register the push token of one of the customer's devices (deviceId: 1 to 100 of A-Z a-z 0-9 . _ "
                ": -, default \"default\"); a push goes to every device; logging out the token that registered "
                "a device removes it",
     .response = "Ok"},
    {HS_POST, "/providers/me/push-token", api_push_token, ROLE_PROVIDER, &token_schema,
     .summary = "Register the push token of one of the provider's devices (deviceId: 1 to 100 of A-Z a-z 0-9 . _ "
                ": -, default \"default\"); a push goes to every device; logging out the token that registered "
                "a device removes it",
     .response = "Ok"},
    {HS_DELETE, "/users/me/push-token/:deviceId", api_push_device_delete, ROLE_USER,
     .summary = "Remove one of the customer's push devices", .response = "Ok",
     .errors = ERRORS(ERR_BAD_REQUEST, ERR_NOT_FOUND)},
    {HS_DELETE, "/providers/me/push-token/:deviceId", api_push_device_delete, ROLE_PROVIDER,
     .summary = "Remove one of the provider's push devices", .response = "Ok",
     .errors = ERRORS(ERR_BAD_REQUEST, ERR_NOT_FOUND)},
    {HS_GET, "/users/me/notifications", api_notifications_list, ROLE_USER, .flags = ROUTE_DB_READ, .query = &list_query,
     .summary = "The last 50 notifications, or any page of them, newest first (unread=true: unread only)",
     .response = "Notification[]"},
    {HS_GET, "/providers/me/notifications", api_notifications_list, ROLE_PROVIDER, .flags = ROUTE_DB_READ,
     .query = &list_query,
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
