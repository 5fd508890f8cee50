-- Issue 20: credentials never kept, a chain that cannot be rewritten unseen, access that can be
-- taken back.

-- Idempotency keys of the routes that take a password or issue a token (now flagged
-- ROUTE_SECRETS: they ignore the header) kept live tokens and unkeyed hashes of passwords.
-- Those routes are open (scope "ip:..."), staff or administrator routes: every row not scoped to
-- a customer or a provider goes. The rows left hold a bare SHA-256 fingerprint, compared as
-- such until they expire (24 hours); new rows hold an HMAC.
DELETE FROM idempotency_keys WHERE scope NOT LIKE 'user:%' AND scope NOT LIKE 'provider:%';

-- Token generations: a token carries its account's generation (claim "gen", 0 when absent).
-- A password reset (customers, providers) or a change of a staff member's role or password, or
-- disabling them, moves it on, and every token issued before is refused.
ALTER TABLE users ADD COLUMN token_gen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE providers ADD COLUMN token_gen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE staff ADD COLUMN token_gen BIGINT NOT NULL DEFAULT 0;
-- A disabled staff member (`marketplace staff disable`) cannot log in; NULL: enabled.
ALTER TABLE staff ADD COLUMN disabled_at BIGINT;

-- audit_log.seq must be a position of the chain, above 0. Rows that break the rule (seq 0 or
-- below; the primary key already refuses NULL here) are set aside in audit_log_set_aside, which
-- `audit verify` reports as a broken chain (nothing is deleted from the trail).
CREATE TABLE audit_log_set_aside (
  seq BIGINT, id TEXT, kind TEXT, elevation_id TEXT, actor_id TEXT, actor_role TEXT, action TEXT,
  target_id TEXT, target_role TEXT, method TEXT, path TEXT, status INTEGER, body TEXT,
  ref_seq BIGINT, created_at BIGINT, prev_hash TEXT, hash TEXT
);
INSERT INTO audit_log_set_aside SELECT * FROM audit_log WHERE seq < 1;
DELETE FROM audit_log WHERE seq < 1;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_seq_positive CHECK (seq > 0);
