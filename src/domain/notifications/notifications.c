/* The notifications domain's declaration (domain/domain.h): its routes, push delivery, its
 * live-update kind, the banner as a one-shot record of the live updates, and its part of an
 * account (notifications, banner, push token). */
#include "domain/notifications/notifications.h"
#include "domain/notifications/notifications_api.h"
#include "domain/notifications/notifications_store.h"

static const domain_job jobs[] = {{"push", notifications_send_push}, {0}};

static const struct events_oneshot *const oneshots[] = {&NOTIFICATIONS_BANNER, NULL};

static const domain_event events[] = {
    {"notification.created", "Notification", "A new entry of the account's notification history"},
    {0},
};

const domain_def notifications_domain = {.name = "notifications",
                                         .routes = notifications_routes,
                                         .jobs = jobs,
                                         .events = events,
                                         .oneshots = oneshots,
                                         .export_parts = NOTIFICATIONS_EXPORT_PARTS,
                                         .forget_in = notifications_store_forget_in};
