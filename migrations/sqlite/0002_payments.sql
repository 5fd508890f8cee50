-- Payments: per-job payment records, webhook idempotency, the simulated processor's state.

ALTER TABLE users ADD COLUMN premium_cancel_at_period_end INTEGER NOT NULL DEFAULT 0;
-- The idempotency key of the subscription being created: concurrent subscribe requests share
-- it, so the processor makes one subscription. Cleared when a subscription ends or fails.
ALTER TABLE users ADD COLUMN premium_subscribe_key TEXT;

-- kind: 'job' (authorized on acceptance, captured on completion) or 'tip' (charged at once).
-- status: AUTHORIZED, PAID, FAILED, CANCELED.
CREATE TABLE payments (
  id TEXT PRIMARY KEY,
  job_id TEXT NOT NULL,
  user_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  status TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  processor_payment_intent_id TEXT UNIQUE,
  failure_reason TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  UNIQUE (job_id, kind)
);
CREATE INDEX payments_user ON payments (user_id);

-- Processor events already applied (Stripe event ids), so a replay changes nothing.
CREATE TABLE webhook_events (
  id TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  received_at BIGINT NOT NULL
);

-- Objects of the built-in simulated processor (customers, payment methods, payment intents,
-- subscriptions, idempotency keys), as Stripe-shaped JSON.
CREATE TABLE processor_sim_objects (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
