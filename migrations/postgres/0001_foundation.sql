-- Foundation: accounts, password reset, rate limits, the durable job queue.
-- Conventions: ids are cuid text; timestamps are epoch milliseconds (BIGINT); booleans are
-- INTEGER 0/1; JSON documents are TEXT; money is integer cents.

CREATE TABLE users (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  name TEXT NOT NULL,
  address TEXT NOT NULL,
  zip TEXT NOT NULL,
  lat DOUBLE PRECISION,
  lng DOUBLE PRECISION,
  is_premium INTEGER NOT NULL DEFAULT 0,
  premium_since BIGINT,
  processor_customer_id TEXT,
  processor_payment_method_id TEXT,
  processor_subscription_id TEXT,
  seasonal_alerts_enabled INTEGER NOT NULL DEFAULT 0,
  push_token TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

CREATE TABLE providers (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  name TEXT NOT NULL,
  phone TEXT,
  company_name TEXT,
  company_url TEXT,
  logo_url TEXT,
  insurance_info TEXT,
  services TEXT NOT NULL DEFAULT '[]',
  service_zips TEXT NOT NULL DEFAULT '[]',
  headshots TEXT NOT NULL DEFAULT '[]',
  id_doc_front TEXT,
  id_doc_back TEXT,
  availability TEXT,
  is_premium INTEGER NOT NULL DEFAULT 0,
  premium_since BIGINT,
  preferred_pro_applied_at BIGINT,
  premium_billed_month TEXT,
  id_check_status TEXT,
  id_check_name TEXT,
  id_check_dob TEXT,
  id_check_expiry TEXT,
  id_check_state TEXT,
  id_check_flags TEXT,
  id_check_at BIGINT,
  ins_doc_url TEXT,
  ins_check_status TEXT,
  ins_check_carrier TEXT,
  ins_check_policy TEXT,
  ins_check_effective TEXT,
  ins_check_expiry TEXT,
  ins_check_coverage TEXT,
  ins_check_flags TEXT,
  ins_check_at BIGINT,
  push_token TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

-- Normalised copies of providers.services / service_zips, so matching a job to providers
-- is an index lookup rather than a scan of JSON text.
CREATE TABLE provider_services (
  provider_id TEXT NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
  service TEXT NOT NULL,
  PRIMARY KEY (provider_id, service)
);
CREATE INDEX provider_services_service ON provider_services (service);

CREATE TABLE provider_zips (
  provider_id TEXT NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
  zip TEXT NOT NULL,
  PRIMARY KEY (provider_id, zip)
);
CREATE INDEX provider_zips_zip ON provider_zips (zip);

CREATE TABLE admins (
  id TEXT PRIMARY KEY,
  email TEXT NOT NULL UNIQUE,
  password_hash TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE password_reset_tokens (
  id TEXT PRIMARY KEY,
  token_hash TEXT NOT NULL UNIQUE,
  email TEXT NOT NULL,
  role TEXT NOT NULL,
  expires_at BIGINT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE INDEX password_reset_tokens_email_role ON password_reset_tokens (email, role);

-- Fixed-window counters shared by every instance: one row per key (limit name + client).
CREATE TABLE rate_limits (
  key TEXT PRIMARY KEY,
  window_start BIGINT NOT NULL,
  count INTEGER NOT NULL
);

-- Durable background work. status: pending, running, done, failed.
CREATE TABLE job_queue (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  payload TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  max_attempts INTEGER NOT NULL DEFAULT 8,
  run_at BIGINT NOT NULL,
  locked_until BIGINT,
  last_error TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX job_queue_ready ON job_queue (status, run_at);
