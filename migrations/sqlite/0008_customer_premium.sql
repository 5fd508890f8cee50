-- Customer premium features and provider tools: favorite providers, private notes on
-- providers, and the record of seasonal alerts (at most one per customer and service per
-- window: the primary key decides between instances and retries).

CREATE TABLE favorites (
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  provider_id TEXT NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
  created_at BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  PRIMARY KEY (user_id, provider_id)
);

CREATE TABLE pro_notes (
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  provider_id TEXT NOT NULL REFERENCES providers(id) ON DELETE CASCADE,
  note TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (user_id, provider_id)
);

-- service: snowplowing or lawncare; sent_at: when the last alert of that service went out.
CREATE TABLE seasonal_alerts (
  user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  service TEXT NOT NULL,
  sent_at BIGINT NOT NULL,
  PRIMARY KEY (user_id, service)
);

-- The daily seasonal-alert task reads opted-in customers by ZIP.
CREATE INDEX users_seasonal_zip ON users (zip) WHERE seasonal_alerts_enabled = 1;
