/* Serving signed file URLs. Keys are checked for shape before any lookup, so a path such as
 * "../x" never reaches the filesystem; a bad or expired signature is 403, a valid one for a
 * deleted file 404.
 *
 * A key's bytes never change (every upload gets a new key, an image's variants are made with
 * it), so the key is the file's strong validator: the ETag is the quoted key, the same on every
 * instance and after restarts, and costs no read of the content. The answer may be cached for
 * as long as its link is valid and no longer (`private, max-age=<seconds left>`). */
#include "domain/files/files_api.h"
#include "core/clock.h"
#include "ext/filetype.h"
#include "ext/storage.h"
#include <stdlib.h>

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
  long long left = strtoll(expires, NULL, 10) - clock_now_ms() / 1000; /* >= 0: the link is valid */
  return hs_reply_file_cached(req, fd, data, size, filetype_mime_for_key(key), arena_printf(&req->arena, "\"%s\"", key),
                              arena_printf(&req->arena, "private, max-age=%lld", left < 0 ? 0 : left));
}
