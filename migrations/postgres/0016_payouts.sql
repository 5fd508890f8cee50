-- Providers get paid (issue 22): a connected account per provider at the payment processor,
-- a transfer record for what each job and tip earned (made after the 72-hour report window),
-- and the Preferred Pro fee billed from those transfers.

-- The provider's connected account (Stripe: an Express account) and its state as last known:
-- status pending (onboarding not finished), enabled (transfers can be made to it) or
-- restricted (the processor wants more before it takes transfers again); requirements is the
-- processor's list of what is due now (a JSON array of field names).
CREATE TABLE payout_accounts (
  provider_id TEXT PRIMARY KEY,
  processor_account_id TEXT NOT NULL UNIQUE,
  status TEXT NOT NULL,
  payouts_enabled INTEGER NOT NULL DEFAULT 0,
  requirements TEXT NOT NULL DEFAULT '[]',
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);

-- One row per money movement to a provider. kind job (the accepted quote's amount of a
-- captured job payment) or tip (a captured tip, whole): payment_id is its payment, one row per
-- payment. kind fee: the Preferred Pro fee deducted from the transfer carrier_id (amount
-- negative), one per carrier.
-- earned_cents: what the payment earned the provider when captured; amount_cents: what it
-- earns now (refunds reduce it); fee_cents: the fee deducted from it when it was made;
-- sent_cents: what the processor's transfer moved (amount less the fee, then); reversed_cents:
-- what went back since. status: scheduled, waiting_for_account, on_hold (until hold_until),
-- paid, reversed (all that was sent went back), failed, cancelled (nothing left to pay).
-- pending_op names the processor request whose outcome is not recorded yet (transfer,
-- reversal), made under idem_key for op_cents: written before the request, cleared by its
-- outcome, so a request whose answer was lost is settled by asking the processor.
CREATE TABLE payout_transfers (
  id TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL,
  job_id TEXT,
  payment_id TEXT UNIQUE,
  carrier_id TEXT UNIQUE,
  kind TEXT NOT NULL,
  earned_cents BIGINT NOT NULL,
  amount_cents BIGINT NOT NULL,
  fee_cents BIGINT NOT NULL DEFAULT 0,
  sent_cents BIGINT NOT NULL DEFAULT 0,
  reversed_cents BIGINT NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  available_at BIGINT NOT NULL,
  hold_until BIGINT,
  paid_at BIGINT,
  failure_reason TEXT,
  destination TEXT,
  processor_transfer_id TEXT UNIQUE,
  pending_op TEXT,
  idem_key TEXT,
  op_cents BIGINT,
  op_started_at BIGINT,
  attempts INTEGER NOT NULL DEFAULT 0,
  seq BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX payout_transfers_provider ON payout_transfers (provider_id, seq);
CREATE INDEX payout_transfers_due ON payout_transfers (status, available_at);
CREATE INDEX payout_transfers_job ON payout_transfers (job_id);
CREATE INDEX payout_transfers_pending ON payout_transfers (pending_op, op_started_at);

-- The Preferred Pro fee of each month a member was billed (YYYY-MM): what the fee rows of
-- payout_transfers deduct, a month whose earnings fall short carrying the rest to the next.
CREATE TABLE payout_fees (
  provider_id TEXT NOT NULL,
  month TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (provider_id, month)
);
