-- Issue 24: accounts their owners manage (name and phone, email changes, logout, deletion) and
-- the read marks of message threads.

-- A customer's phone (PATCH /users/me), as providers have one.
ALTER TABLE users ADD COLUMN phone TEXT;
-- When the owner deleted the account (DELETE /users/me, /providers/me). The row stays for the
-- ledger (payments, completed jobs, reviews name it), erased: name "Deleted account", an email
-- deleted-<id>@deleted that no email check admits (the address can register again), no phone, address,
-- photos, documents or push token, no usable password, its token generation moved on.
ALTER TABLE users ADD COLUMN deleted_at BIGINT;
ALTER TABLE providers ADD COLUMN deleted_at BIGINT;

-- Tokens ended before their expiry (POST /auth/logout): the token's id (its jti claim) until it
-- would have expired (expires_at, epoch ms); then the row is deleted (hourly).
CREATE TABLE ended_tokens (
  token_id TEXT PRIMARY KEY,
  expires_at BIGINT NOT NULL
);
CREATE INDEX ended_tokens_expiry ON ended_tokens (expires_at);

-- Email changes waiting for their confirmation link (POST /auth/change-email): only the SHA-256
-- of the link's token is kept; one pending change per account, for 24 hours.
CREATE TABLE email_changes (
  token_hash TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  email TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX email_changes_account ON email_changes (account_id, role);

-- What each side of a thread (job, provider) has read: the seq of the last message it marked
-- read (POST /jobs/:id/messages/read). reader_role: user or provider.
CREATE TABLE message_reads (
  job_id TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  reader_role TEXT NOT NULL,
  read_seq BIGINT NOT NULL,
  read_at BIGINT NOT NULL,
  PRIMARY KEY (job_id, provider_id, reader_role)
);

-- A provider's threads, quotes and reviews, newest first (keyset order for paging).
CREATE INDEX messages_provider ON messages (provider_id, job_id, seq);
CREATE INDEX quotes_provider_seq ON quotes (provider_id, seq);
CREATE INDEX reviews_provider_recent ON reviews (provider_id, created_at, id);
