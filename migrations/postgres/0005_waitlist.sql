-- Waitlist sign-ups (POST /waitlist): one per email; signing up again updates the entry.
CREATE TABLE waitlist_emails (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  name TEXT NOT NULL,
  zip TEXT NOT NULL,
  role TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
