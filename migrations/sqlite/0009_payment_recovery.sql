-- Payments that recover and never charge twice (issue 15).
--
-- Each payment records the processor request in force: its operation while its outcome is not
-- known (pending_op: authorize, renew, charge, tip, capture, void), the idempotency key and card
-- it was made with, and when its carrier started it (a request left without an answer is
-- recorded as started a lease earlier, so anyone may settle it). A retry repeats exactly that
-- request; a new attempt gets a new key.
ALTER TABLE payments ADD COLUMN payment_method_id TEXT;
ALTER TABLE payments ADD COLUMN idem_key TEXT;
ALTER TABLE payments ADD COLUMN pending_op TEXT;
ALTER TABLE payments ADD COLUMN op_started_at BIGINT;
ALTER TABLE payments ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
-- When the live authorization lapses (Stripe's capture_before); NULL without one.
ALTER TABLE payments ADD COLUMN hold_expires_at BIGINT;
CREATE INDEX payments_pending ON payments (pending_op, op_started_at);
CREATE INDEX payments_holds ON payments (status, hold_expires_at);

-- A subscribe attempt whose answer was lost: the next one asks the processor what it made
-- before choosing a new key.
ALTER TABLE users ADD COLUMN premium_subscribe_unconfirmed INTEGER NOT NULL DEFAULT 0;

-- Tips under way or unanswered before this migration (statuses PENDING and UNCONFIRMED, key
-- tip-<id>) wait to be settled by looking their key up at the processor.
UPDATE payments SET status = 'FAILED', pending_op = 'tip', op_started_at = 0, idem_key = 'tip-' || id
WHERE status IN ('PENDING', 'UNCONFIRMED');
