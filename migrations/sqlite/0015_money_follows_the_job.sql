-- Every charge right (issue 21): a job's payment history, refunds, renewals that keep a good
-- hold, subscription events applied in order.
--
-- payments gains:
-- - released_at: NULL for the job's current payment; set when the job went back to PENDING and
--   the payment moved to the job's history (its hold released, its money refunded). Only the
--   current payment of a (job, kind) is unique, so a reopened job is authorized afresh;
-- - refunded_cents: what was given back of a captured payment (status REFUNDED once it is all);
-- - hold_method_id: the card of the live hold, which a renewal refused on the saved card
--   tries again;
-- - paid_at: when the money was captured (a refund later changes updated_at, not this).
-- status gains PENDING: a request that would make the payment's first hold or charge is under
-- way or unanswered (it read FAILED before).
-- SQLite cannot drop the table's UNIQUE (job_id, kind), so the table is rebuilt.
CREATE TABLE payments_rebuilt (
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
  payment_method_id TEXT,
  idem_key TEXT,
  pending_op TEXT,
  op_started_at BIGINT,
  attempts INTEGER NOT NULL DEFAULT 0,
  hold_expires_at BIGINT,
  hold_method_id TEXT,
  refunded_cents BIGINT NOT NULL DEFAULT 0,
  paid_at BIGINT,
  released_at BIGINT
);
INSERT INTO payments_rebuilt (id, job_id, user_id, kind, status, amount_cents, processor_payment_intent_id,
                              failure_reason, created_at, updated_at, payment_method_id, idem_key, pending_op,
                              op_started_at, attempts, hold_expires_at)
SELECT id, job_id, user_id, kind, status, amount_cents, processor_payment_intent_id, failure_reason, created_at,
       updated_at, payment_method_id, idem_key, pending_op, op_started_at, attempts, hold_expires_at
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_rebuilt RENAME TO payments;
CREATE INDEX payments_user ON payments (user_id);
CREATE INDEX payments_job ON payments (job_id);
CREATE INDEX payments_pending ON payments (pending_op, op_started_at);
CREATE INDEX payments_holds ON payments (status, hold_expires_at);
CREATE UNIQUE INDEX payments_current ON payments (job_id, kind) WHERE released_at IS NULL;

-- Holds authorized before holdExpiresAt existed lapse 7 days after they were made; the
-- payment's creation is the earliest that can have been, so they are renewed early, never late.
UPDATE payments SET hold_expires_at = created_at + 604800000 WHERE status = 'AUTHORIZED' AND hold_expires_at IS NULL;
UPDATE payments SET hold_method_id = payment_method_id
WHERE status = 'AUTHORIZED' AND (pending_op IS NULL OR pending_op <> 'renew');
UPDATE payments SET status = 'PENDING' WHERE status = 'FAILED' AND pending_op IN ('authorize', 'charge', 'tip');
UPDATE payments SET paid_at = updated_at WHERE status = 'PAID';

-- One row per refund of a payment. A refund the service makes is written first (PENDING, with
-- its idempotency key) and completed with the processor's refund id (SUCCEEDED) or its refusal
-- (FAILED); a refund made at the processor directly arrives by webhook as a SUCCEEDED row
-- without a key. source: staff, job_reopened, duplicate, processor.
CREATE TABLE payment_refunds (
  id TEXT PRIMARY KEY,
  payment_id TEXT NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
  amount_cents BIGINT NOT NULL,
  reason TEXT NOT NULL,
  source TEXT NOT NULL,
  staff_id TEXT,
  status TEXT NOT NULL,
  idem_key TEXT UNIQUE,
  processor_refund_id TEXT UNIQUE,
  failure_reason TEXT,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX payment_refunds_payment ON payment_refunds (payment_id);

-- The `created` (epoch seconds) of the newest event applied to each subscription: an older
-- event changes nothing.
CREATE TABLE subscription_events (
  subscription_id TEXT PRIMARY KEY,
  last_created BIGINT NOT NULL
);
