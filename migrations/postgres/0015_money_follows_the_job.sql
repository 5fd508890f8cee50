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
ALTER TABLE payments ADD COLUMN hold_method_id TEXT;
ALTER TABLE payments ADD COLUMN refunded_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN paid_at BIGINT;
ALTER TABLE payments ADD COLUMN released_at BIGINT;
ALTER TABLE payments DROP CONSTRAINT payments_job_id_kind_key;
CREATE INDEX payments_job ON payments (job_id);
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
