-- The staff portal: staff accounts, elevation (impersonation) requests, the tamper-evident
-- audit log, and support tickets.

-- role: customer_support, professional_support, technical_support, internal_audit.
CREATE TABLE staff (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  role TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  seq BIGINT NOT NULL
);

-- status: PENDING, APPROVED, ACTIVE, REJECTED, DEACTIVATED. At most one open (PENDING,
-- APPROVED or ACTIVE) request per staff member and target: the partial unique index decides
-- concurrent requests.
CREATE TABLE elevation_requests (
  id TEXT PRIMARY KEY,
  staff_id TEXT NOT NULL REFERENCES staff(id),
  target_id TEXT NOT NULL,
  target_role TEXT NOT NULL,
  reason TEXT NOT NULL,
  status TEXT NOT NULL,
  resolved_at BIGINT,
  activated_at BIGINT,
  deactivated_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  seq BIGINT NOT NULL
);
CREATE UNIQUE INDEX elevation_requests_open ON elevation_requests (staff_id, target_id, target_role)
  WHERE status IN ('PENDING', 'APPROVED', 'ACTIVE');
CREATE INDEX elevation_requests_staff ON elevation_requests (staff_id, seq);
CREATE INDEX elevation_requests_target ON elevation_requests (target_id, target_role);
CREATE INDEX elevation_requests_status ON elevation_requests (status, activated_at);

-- The audit log is one hash chain: record seq stores the SHA-256 of record seq - 1 (prev_hash)
-- and of its own content chained to it (hash). kind: request (an impersonated request, written
-- before its handler runs), outcome (its status, ref_seq names the request), action (a staff or
-- administrator change). audit_tip holds the last seq and hash: appending updates it first,
-- which serialises appends on both engines and lets a verifier notice a truncated tail.
CREATE TABLE audit_log (
  seq BIGINT PRIMARY KEY,
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
CREATE INDEX audit_log_elevation ON audit_log (elevation_id, seq);
CREATE INDEX audit_log_actor ON audit_log (actor_id, seq);

CREATE TABLE audit_tip (
  id INTEGER PRIMARY KEY,
  seq BIGINT NOT NULL,
  hash TEXT NOT NULL
);
INSERT INTO audit_tip (id, seq, hash) VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

-- Support requests of customers (account_role 'user') and providers. status: OPEN,
-- IN_PROGRESS, RESOLVED, CLOSED.
CREATE TABLE support_tickets (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  account_role TEXT NOT NULL,
  subject TEXT NOT NULL,
  body TEXT NOT NULL,
  category TEXT NOT NULL,
  status TEXT NOT NULL,
  assigned_to_id TEXT,
  notes TEXT,
  resolved_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  seq BIGINT NOT NULL
);
CREATE INDEX support_tickets_status ON support_tickets (status, seq);
CREATE INDEX support_tickets_account ON support_tickets (account_id, account_role);
