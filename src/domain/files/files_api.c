/* Serving signed file URLs. Keys are checked for shape before any lookup, so a path such as
 * "../x" never reaches the filesystem; a bad or expired signature is 403, a valid one for a
 * deleted file 404. */
#include "domain/files/files_api.h"
#include "ext/filetype.h"
#include "ext/storage.h"

err_t api_files_get(hs_req *req) {
  const char *key = hs_param(req, "key");
  const char *expires = json_string_value(json_object_get(req->query, "expires"));
  const char *sig = json_string_value(json_object_get(req->query, "sig"));
  if (!storage_url_valid(key, expires, sig)) return hs_fail(req, ERR_FORBIDDEN, "Invalid or expired file link");
  int fd;
  char *data;
  size_t size;
  bool missing;
  if (!storage_open(key, &fd, &data, &size, &missing))
    return missing ? hs_not_found(req, "File") : hs_fail(req, ERR_INTERNAL, NULL);
  return hs_reply_file(req, fd, data, size, filetype_mime_for_key(key));
}
