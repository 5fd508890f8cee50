/* SQL of the providers domain. Internal. */
#ifndef DOMAIN_PROVIDERS_STORE_H
#define DOMAIN_PROVIDERS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <jansson.h>

/* The provider row with every column (names as in the table); ERR_NOT_FOUND when missing. */
err_t prov_store_get(arena *a, const char *id, db_res **row);
/* Applies a validated PATCH body (name, phone, serviceZips, services, companyName,
 * companyUrl), keeping the normalised service and ZIP tables in step. */
err_t prov_store_update_profile(const char *id, json_t *patch);
/* Sets logo_url to key; *old receives the replaced key (arena) or NULL. */
err_t prov_store_set_logo(arena *a, const char *id, const char *key, const char **old);
/* Replaces the headshots array when it still equals old_json (optimistic); ERR_CONFLICT when
 * it changed meanwhile. */
err_t prov_store_swap_headshots(const char *id, const char *old_json, const char *new_json);
/* Records new licence images (NULL: keep that side), sets idCheckStatus pending and queues
 * recognition, in one transaction. *old_front / *old_back receive replaced keys. */
err_t prov_store_set_id_documents(arena *a, const char *id, const char *front, const char *back,
                                  const char **old_front, const char **old_back);
/* Records a new insurance document, sets insCheckStatus pending and queues recognition. */
err_t prov_store_set_insurance_document(arena *a, const char *id, const char *key, const char **old);

#endif
