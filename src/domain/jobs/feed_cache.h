/* The provider feed's parts, kept in process memory: the open jobs of one
 * (service, ZIP) in feed order, as read at a version of feed_versions (migration 0013). */
#ifndef DOMAIN_JOBS_FEED_CACHE_H
#define DOMAIN_JOBS_FEED_CACHE_H
#include "core/arena.h"
#include "db/db.h"

/* The part of (service, zip) read at version, held until the arena ends; NULL when absent. */
const db_res *feed_cache_get(arena *a, const char *service, const char *zip, int64_t version);
/* Keeps a copy of rows as the part of (service, zip) at version, in place of an older one. */
void feed_cache_put(const char *service, const char *zip, int64_t version, const db_res *rows);
/* Forgets every part (shutdown; tests). */
void feed_cache_clear(void);

#endif
