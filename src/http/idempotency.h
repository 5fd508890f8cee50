/* Idempotency keys (Stripe's semantics) for every POST and PATCH route, uploads included.
 *
 * A client may send `Idempotency-Key: <1 to 255 printable ASCII characters>`. The first
 * request with a key claims it in the database and runs; its answer (status and body) is kept
 * for 24 hours of the service clock per (account, or client address when unauthenticated, and
 * key). A repeat with the same method, path and body gets the kept answer again, marked
 * replayed, and runs nothing; the same key with another request answers 422; a repeat while
 * the first still runs answers 409 (Retry-After: 1). An upload is the same request when its
 * text fields and its files (field and SHA-256 of the bytes, in order) are. 400 and 5xx
 * answers are not kept, so a corrected retry runs. Keys live in the database, so every
 * instance honours them and a restart keeps them.
 * Routes flagged ROUTE_SECRETS (logins, registrations, password resets, token issues)
 * ignore the header: a kept answer would be a live token, and a kept fingerprint of a body
 * holding a password would be a target for guessing. The fingerprint of any other request is
 * an HMAC-SHA256 under a key derived from JWT_SECRET, never a bare hash of the body.
 * The server calls hs_idem_begin() after validation and hs_idem_end() with the final answer,
 * both on the worker thread that runs the request. */
#ifndef HTTP_IDEMPOTENCY_H
#define HTTP_IDEMPOTENCY_H
#include "http/http.h"

/* A kept answer is replayed for RETAIN_IDEMPOTENCY (24 hours; CFG.retain.idempotency). */
/* A claim whose request never finished (the instance died) is given up after this long. */
#define IDEMPOTENCY_LEASE_MS (5LL * 60 * 1000)

/* True when the route takes idempotency keys (POST or PATCH, JSON or multipart, not a raw
 * body, not ROUTE_INLINE or ROUTE_SECRETS). */
bool hs_idem_applies(const hs_route *r);
/* Looks at the request's Idempotency-Key. Returns true when the handler should run (no key,
 * or the key is now claimed by this request); false when the request is already answered:
 * 400 for a malformed key, 409 in progress, 422 reused with another request, or the kept
 * answer (req->replayed set). */
bool hs_idem_begin(hs_req *req);
/* Records the request's final answer (status and JSON text) for its claimed key, or releases
 * the claim when the answer is not kept (400, 5xx). No-op without a claim. */
void hs_idem_end(hs_req *req, int status, const char *body_text);
/* Deletes the keys whose kept answer expired by now (RETAIN_IDEMPOTENCY after their request). */
err_t hs_idem_prune(int64_t now);

#endif
