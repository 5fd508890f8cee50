/* SQL for the users table. Internal to the users domain. */
#ifndef DOMAIN_USERS_STORE_H
#define DOMAIN_USERS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/domain.h"
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* What a customer's change that premium gates came to (users_fail answers the failures). */
typedef enum {
  USERS_CHANGED,
  USERS_NO_USER,       /* the customer is gone */
  USERS_NEEDS_PREMIUM, /* premium is required; nothing changed */
  USERS_FAILED,        /* storage failed */
} users_outcome;

/* The SQL condition, over a users row, that the customer has premium: from the subscription's
 * first activation until its end. is_premium follows the subscription's status; premium_since
 * stays through a spell of past_due and is cleared only when the subscription ends, so a
 * customer whose payment is late keeps premium. Every premium gate uses this condition. */
#define USERS_HAS_PREMIUM "(is_premium = 1 OR premium_since IS NOT NULL)"

/* The profile row of user id (id, email, name, phone, address, zip, lat, lng, is_premium,
 * premium_since, seasonal_alerts_enabled, created_at); ERR_NOT_FOUND when missing. */
err_t users_store_profile(arena *a, const char *id, db_res **out);
/* Sets the fields present in patch ("name", "phone": "" clears it, "lat", "lng") and keeps the
 * others; ERR_NOT_FOUND when missing. */
err_t users_store_update_profile(const char *id, json_t *patch);

/* ---- premium features ---- */

/* Whether customer id has premium (USERS_HAS_PREMIUM); ERR_NOT_FOUND when missing. */
err_t users_store_premium(const char *id, bool *premium);
/* The order of a customer's favorites: most recently added first, by (seq, provider). */
extern const db_keyset FAVORITES_KEYSET;
/* The page pg of the customer's favorite providers (id, name, company_name, logo_url,
 * headshots, services). */
err_t users_store_favorites(arena *a, const char *id, const db_page *pg, db_res **out);
/* Adds a favorite (idempotent); ERR_NOT_FOUND when the provider does not exist. */
err_t users_store_add_favorite(const char *id, const char *provider_id);
err_t users_store_remove_favorite(const char *id, const char *provider_id);
/* The customer's notes: provider_id, note. */
err_t users_store_pro_notes(arena *a, const char *id, db_res **out);
/* Creates or replaces the note on a provider; ERR_NOT_FOUND when the provider does not exist. */
err_t users_store_set_pro_note(const char *id, const char *provider_id, const char *note);
err_t users_store_delete_pro_note(const char *id, const char *provider_id);
/* The customer's captured payments since `since` (epoch ms): kind (job or tip), job_id,
 * amount_cents, paid_at, service, provider_id, provider_name, company_name; oldest first. */
err_t users_store_spend(arena *a, const char *id, int64_t since, db_res **out);
/* Sets seasonalAlertsEnabled. Enabling needs premium: USERS_NEEDS_PREMIUM without it (nothing
 * changes). */
users_outcome users_store_set_seasonal_alerts(const char *id, bool enabled);

/* ---- seasonal alerts (background) ---- */

/* The ZIPs of opted-in premium customers. */
err_t users_store_alert_zips(arena *a, db_res **out);
/* Queues the day's run of each ZIP of zips (column 0), once per slot and ZIP whoever queues it,
 * in one transaction. */
err_t users_store_queue_alert_zips(const db_res *zips, int64_t slot);
/* The opted-in premium customers of a ZIP (id). */
err_t users_store_alert_customers(arena *a, const char *zip, db_res **out);
/* Records an alert of service for customer id at now and, in the same transaction, writes
 * the notification (and its push), unless the last alert of that service was sent after
 * cutoff; *sent says which. Retries and other instances see the same record (the primary
 * key decides). */
err_t users_store_send_alert(const char *id, const char *service, int64_t now, int64_t cutoff, const char *title,
                             const char *body, bool *sent);

/* ---- the account's part (domain/domain.h) ---- */

/* The customer's row lock, on c inside the caller's transaction: concurrent transactions about
 * the customer run one after another. */
db_rc users_store_lock_in(db_conn *c, const char *id);
/* The export's reads (account_read_in): the customer's row (none when it is deleted), its
 * addresses, favorites, notes and seasonal-alert records, each oldest first. */
#define USERS_EXPORT_PARTS 5
extern const char *const USERS_EXPORT_SQL[USERS_EXPORT_PARTS][2];
/* forget_in of the users table's profile columns and of the premium features' tables: a
 * customer's favorites, notes and seasonal-alert records go, and at its erasure its row's
 * profile is erased (name ACCOUNT_DELETED_NAME, no phone, address, coordinates or alerts); the
 * favorites and notes that name a provider go with it. */
err_t users_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
