-- Issue 20: credentials never kept, a chain that cannot be rewritten unseen, access that can be
-- taken back.

-- Idempotency keys of the routes that take a password or issue a token (now flagged
-- ROUTE_SECRETS: they ignore the header) kept live tokens and unkeyed hashes of passwords.
-- Those routes are open (scope "ip:..."), staff or administrator routes: every row not scoped to
-- a customer or a provider goes. The rows left hold a bare SHA-256 fingerprint, compared as
-- such until they expire (24 hours); new rows hold an HMAC.
DELETE FROM idempotency_keys WHERE scope NOT LIKE 'user:%' AND scope NOT LIKE 'provider:%';
