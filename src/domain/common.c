/* Shared domain vocabulary, and the all-or-none storing of a request's files. */
#include "domain/common.h"
#include "core/log.h"
#include "ext/storage.h"
#include <stddef.h>

const char *const SERVICE_NAMES[] = {"lawncare", "snowplowing", "handyman", "home_cleaning", NULL};
const char *const JOB_STATUS_NAMES[] = {"PENDING",     "QUOTED",    "ACCEPTED",  "ON_THE_WAY",
                                        "IN_PROGRESS", "COMPLETED", "CANCELLED", NULL};

bool common_store_uploads(hs_upload **files, int n, json_t *keys) {
  size_t before = json_array_size(keys);
  for (int i = 0; i < n; i++) {
    char key[STORAGE_KEY_LEN], err[256];
    if (!storage_save(files[i]->path, files[i]->ext, files[i]->mime, key, err)) {
      log_msg(LOG_ERROR, "storing an upload failed: %s", err);
      while (json_array_size(keys) > before) {
        storage_delete(json_string_value(json_array_get(keys, before)));
        json_array_remove(keys, before);
      }
      return false;
    }
    json_array_append_new(keys, json_string(key));
  }
  return true;
}

void common_delete_stored(const json_t *keys) {
  size_t i;
  const json_t *k;
  json_array_foreach(keys, i, k) storage_delete(json_string_value(k));
}
