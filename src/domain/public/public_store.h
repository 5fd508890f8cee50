/* SQL of the public routes. Internal. */
#ifndef DOMAIN_PUBLIC_STORE_H
#define DOMAIN_PUBLIC_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <stdbool.h>

/* The ZIP of customer user_id; *zip is NULL when there is no such customer. */
err_t public_store_user_zip(arena *a, const char *user_id, const char **zip);
/* The services offered in zip (one row each, column `service`) and how many providers serve it. */
err_t public_store_coverage(arena *a, const char *zip, db_res **services, int64_t *providers);

typedef struct waitlist_entry {
  const char *name, *email, *zip, *role;
} waitlist_entry;
/* Adds e, or updates the entry of its email, and queues the confirmation email (subject,
 * body) in the same transaction. */
err_t public_store_waitlist(const waitlist_entry *e, const char *subject, const char *body);

#endif
