/* SQL of saved addresses (table user_addresses). Internal to the users domain. Every read and
 * change is scoped to the owning customer. */
#ifndef DOMAIN_USERS_ADDRESSES_STORE_H
#define DOMAIN_USERS_ADDRESSES_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include "db/page.h"
#include "domain/users/users_store.h"
#include <stdbool.h>

/* The columns every address read returns, in this order (the photo columns by number:
 * ADDRESS_STREET_COL, ADDRESS_AREA_COL). */
#define ADDRESS_COLUMNS                                                                                                \
  "id, label, address, zip, is_primary, driveway_length, lawn_acres, street_view_photo, created_at, "                  \
  "service_area_photos"
#define ADDRESS_PRIMARY_COL 4
#define ADDRESS_STREET_COL 7
#define ADDRESS_AREA_COL 9

/* The order of a customer's addresses: the primary first, then (created_at, id). */
extern const db_keyset ADDRESSES_KEYSET;
/* The page pg of the customer's addresses. */
err_t addresses_store_list(arena *a, const char *user_id, const db_page *pg, db_res **out);
/* The customer's address id (one row, or none). */
err_t addresses_store_get(arena *a, const char *user_id, const char *id, db_res **out);
/* Saves a new address, primary when it is the customer's first. The count and the insert share
 * a transaction that first locks the customer's row (the whole database on SQLite), so
 * concurrent saves are counted one after another. USERS_NEEDS_PREMIUM (nothing saved) when
 * the customer already has one and no premium. */
users_outcome addresses_store_insert(const char *user_id, const char *id, const char *label, const char *address,
                                     const char *zip);
/* Makes id the customer's only primary address. */
err_t addresses_store_make_primary(const char *user_id, const char *id);
/* How many addresses the customer has. */
err_t addresses_store_count(const char *user_id, int64_t *n);
/* Deletes the customer's non-primary address id; *gone receives the photo columns the row held
 * when it was deleted (street_view_photo, service_area_photos), no row when nothing was. */
err_t addresses_store_delete(arena *a, const char *user_id, const char *id, db_res **gone);
/* Sets the property details given (has_*: whether each was). */
err_t addresses_store_set_details(const char *id, bool has_driveway, double driveway, bool has_acres, double acres);
/* Writes the photo columns of address row (as read by addresses_store_get) only if they still
 * hold what was read (a concurrent photo request changes them between the read and the
 * write): *moved tells the caller to read again and recompute. */
err_t addresses_store_swap_photos(const db_res *row, const char *street, const char *area_json, bool *moved);

/* forget_in of a customer's addresses (either mode): they go, their photos' keys appended to
 * who->files. */
err_t addresses_store_forget_in(db_conn *c, const account_ref *who, forget_mode mode);

#endif
