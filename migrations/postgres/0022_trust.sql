-- Trust after the fixes (issue 31): email changes that cannot outlive the owner, reset tokens
-- bound to the account, and the requests that limit email changes.

-- An email change remembers the account's token generation when it was asked for (a change
-- whose tokens were ended since is refused), and the hash of the link sent to the current
-- address that cancels it.
ALTER TABLE email_changes ADD COLUMN token_gen BIGINT NOT NULL DEFAULT -1;
ALTER TABLE email_changes ADD COLUMN cancel_hash TEXT;
CREATE INDEX email_changes_cancel ON email_changes (cancel_hash);

-- Every email change asked for, kept a day: 5 an hour per account, 3 a day per address.
CREATE TABLE email_change_requests (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  email TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX email_change_requests_account ON email_change_requests (account_id, role, created_at);
CREATE INDEX email_change_requests_email ON email_change_requests (email, created_at);

-- A reset token resets the account it was made for (its id), whatever its email is by then.
ALTER TABLE password_reset_tokens ADD COLUMN account_id TEXT;
