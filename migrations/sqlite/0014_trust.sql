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

-- audit_log.seq was a BIGINT PRIMARY KEY, which SQLite lets be NULL (or text): rows outside the
-- chain's positions that `audit verify` never read. The table is rebuilt with seq an integer
-- above 0. Rows that break that rule are set aside in audit_log_set_aside, which `audit verify`
-- reports as a broken chain (nothing is deleted from the trail).
CREATE TABLE audit_log_set_aside (
  seq BIGINT, id TEXT, kind TEXT, elevation_id TEXT, actor_id TEXT, actor_role TEXT, action TEXT,
  target_id TEXT, target_role TEXT, method TEXT, path TEXT, status INTEGER, body TEXT,
  ref_seq BIGINT, created_at BIGINT, prev_hash TEXT, hash TEXT
);
INSERT INTO audit_log_set_aside SELECT * FROM audit_log WHERE NOT (typeof(seq) = 'integer' AND seq > 0);

CREATE TABLE audit_log_new (
  seq BIGINT NOT NULL PRIMARY KEY CHECK (typeof(seq) = 'integer' AND seq > 0),
  id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  elevation_id TEXT,
  actor_id TEXT,
  actor_role TEXT,
  action TEXT,
  target_id TEXT,
  target_role TEXT,
  method TEXT,
  path TEXT,
  status INTEGER,
  body TEXT,
  ref_seq BIGINT,
  created_at BIGINT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
INSERT INTO audit_log_new SELECT * FROM audit_log WHERE typeof(seq) = 'integer' AND seq > 0;
DROP TABLE audit_log;
ALTER TABLE audit_log_new RENAME TO audit_log;
CREATE INDEX audit_log_elevation ON audit_log (elevation_id, seq);
CREATE INDEX audit_log_actor ON audit_log (actor_id, seq);
