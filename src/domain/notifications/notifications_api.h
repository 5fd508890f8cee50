/* Handlers of the notifications domain and its rows. Internal to the domain. */
#ifndef DOMAIN_NOTIFICATIONS_API_H
#define DOMAIN_NOTIFICATIONS_API_H
#include "domain/domain.h"
#include "http/http.h"

/* notifications_routes.c: the domain's rows (ended by a row of zeros) */
extern const hs_route notifications_routes[];

/* A device's id when the app names none: one device, as before devices had ids. */
#define PUSH_DEFAULT_DEVICE "default"
#define PUSH_DEVICE_ID_MAX 100
err_t api_push_token(hs_req *req);
err_t api_push_device_delete(hs_req *req);
err_t api_notifications_list(hs_req *req);
err_t api_notifications_read(hs_req *req);
err_t api_notification_read(hs_req *req);
err_t api_banner_poll(hs_req *req);
/* One push message to the push service (the "push" work, notifications.c). */
bool notifications_send_push(json_t *msg, char err[256]);
/* The banner as a one-shot record of the live updates (events.h), a row of the descriptor. */
extern const struct events_oneshot NOTIFICATIONS_BANNER;

/* The export's notifications (domain_def's export_parts). */
extern const account_part NOTIFICATIONS_EXPORT_PARTS[];

#endif
