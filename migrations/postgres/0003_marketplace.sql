-- The marketplace flow: saved addresses, jobs, quotes, reviews, reports, recurring requests.

CREATE TABLE user_addresses (
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  label TEXT NOT NULL,
  address TEXT NOT NULL,
  zip TEXT NOT NULL,
  is_primary INTEGER NOT NULL DEFAULT 0,
  driveway_length DOUBLE PRECISION,
  lawn_acres DOUBLE PRECISION,
  street_view_photo TEXT,
  service_area_photos TEXT NOT NULL DEFAULT '[]',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX user_addresses_user ON user_addresses (user_id);

-- status: PENDING, QUOTED, ACCEPTED, ON_THE_WAY, IN_PROGRESS, COMPLETED, CANCELLED.
-- preferred_at is NULL for ASAP jobs without a date; feed_at orders the provider feed
-- (ASAP jobs first: their feed_at is -2^62, before any date); seq orders jobs posted in the
-- same millisecond.
CREATE TABLE jobs (
  id TEXT PRIMARY KEY,
  customer_id TEXT NOT NULL,
  provider_id TEXT,
  service TEXT NOT NULL,
  description TEXT,
  preferred_at BIGINT,
  is_asap INTEGER NOT NULL DEFAULT 0,
  feed_at BIGINT NOT NULL,
  details TEXT,
  address TEXT NOT NULL,
  zip TEXT NOT NULL,
  lat DOUBLE PRECISION,
  lng DOUBLE PRECISION,
  status TEXT NOT NULL,
  images TEXT NOT NULL DEFAULT '[]',
  before_images TEXT NOT NULL DEFAULT '[]',
  after_images TEXT NOT NULL DEFAULT '[]',
  tip_cents BIGINT,
  eta_minutes INTEGER,
  accepted_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  seq BIGINT NOT NULL
);
CREATE INDEX jobs_feed ON jobs (service, zip, status, feed_at);
CREATE INDEX jobs_customer ON jobs (customer_id, seq);
CREATE INDEX jobs_provider ON jobs (provider_id, status);

-- status: PENDING, ACCEPTED, REJECTED. service is copied from the job for the market rate.
CREATE TABLE quotes (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  provider_id TEXT NOT NULL,
  service TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  platform_fee_cents BIGINT NOT NULL,
  total_cents BIGINT NOT NULL,
  note TEXT,
  scheduled_at BIGINT,
  status TEXT NOT NULL,
  accepted_at BIGINT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  UNIQUE (job_id, provider_id)
);
CREATE INDEX quotes_market ON quotes (service, status, accepted_at);
CREATE INDEX quotes_provider ON quotes (provider_id);

CREATE TABLE reviews (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL UNIQUE REFERENCES jobs(id) ON DELETE CASCADE,
  customer_id TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  rating INTEGER NOT NULL,
  comment TEXT,
  created_at BIGINT NOT NULL
);
CREATE INDEX reviews_provider ON reviews (provider_id);

CREATE TABLE job_reports (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL UNIQUE REFERENCES jobs(id) ON DELETE CASCADE,
  customer_id TEXT NOT NULL,
  description TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

CREATE TABLE recurring_requests (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  customer_id TEXT NOT NULL,
  provider_id TEXT NOT NULL,
  day_of_week INTEGER NOT NULL,
  time_slot TEXT NOT NULL,
  end_date TEXT NOT NULL,
  created_at BIGINT NOT NULL
);

-- Message threads are per (job, provider); provider_id names the thread.
CREATE TABLE messages (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  provider_id TEXT NOT NULL,
  sender_id TEXT NOT NULL,
  sender_role TEXT NOT NULL,
  sender_name TEXT NOT NULL,
  content TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  seq BIGINT NOT NULL -- clock_sequence(): orders messages posted in the same millisecond
);
CREATE INDEX messages_thread ON messages (job_id, provider_id, seq);

-- Persistent notifications of a customer (role 'user') or provider.
CREATE TABLE notifications (
  id TEXT PRIMARY KEY,
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  job_id TEXT,
  is_read INTEGER NOT NULL DEFAULT 0,
  created_at BIGINT NOT NULL,
  seq BIGINT NOT NULL
);
CREATE INDEX notifications_account ON notifications (account_id, role, seq);

-- The one-shot in-app banner: at most one pending per account, returned and removed by a poll.
CREATE TABLE banners (
  account_id TEXT NOT NULL,
  role TEXT NOT NULL,
  icon TEXT,
  title TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (account_id, role)
);
