-- Money as the processor sees it (issue 30): disputes, provider balances, refunds that say
-- who bears them, captures as captured, receipts, reports that staff resolve, and Preferred
-- Pro memberships that end.

-- A dispute (chargeback) of a payment's charge, as the processor reports it (charge.dispute.*
-- events). status is the processor's (needs_response, under_review, won, lost; an inquiry:
-- warning_needs_response, warning_under_review, warning_closed); lost_cents is what a lost
-- dispute took, applied to the provider's transfer as a refund would be; the evidence staff
-- sent is kept with who sent it.
CREATE TABLE disputes (
  id TEXT PRIMARY KEY,
  processor_dispute_id TEXT NOT NULL UNIQUE,
  payment_id TEXT NOT NULL,
  job_id TEXT NOT NULL,
  status TEXT NOT NULL,
  reason TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  evidence_due_by BIGINT,
  funds_withdrawn INTEGER NOT NULL DEFAULT 0,
  lost_cents BIGINT NOT NULL DEFAULT 0,
  evidence_text TEXT,
  evidence_files TEXT,
  evidence_staff_id TEXT,
  evidence_submitted_at BIGINT,
  closed_at BIGINT,
  seq BIGINT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX disputes_payment ON disputes (payment_id);
CREATE INDEX disputes_job ON disputes (job_id);
CREATE INDEX disputes_list ON disputes (seq, id);

-- The payment's latest dispute as the Payment JSON shows it ({ status, reason, amount,
-- evidenceDueBy }), what lost disputes took, the refunds the platform bore alone (providerShare
-- "none"), what was authorized when less was captured, and the card its charge was made on
-- (for receipts).
ALTER TABLE payments ADD COLUMN dispute_json TEXT;
ALTER TABLE payments ADD COLUMN lost_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN goodwill_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN authorized_cents BIGINT;
ALTER TABLE payments ADD COLUMN card_brand TEXT;
ALTER TABLE payments ADD COLUMN card_last4 TEXT;

-- Who bears a refund: prorata (the provider's transfer gives back its share) or none (the
-- platform alone, as goodwill).
ALTER TABLE payment_refunds ADD COLUMN provider_share TEXT NOT NULL DEFAULT 'prorata';

-- What a provider owes the platform besides the Preferred Pro fee (payout_fees): kind reversal,
-- a refunded or disputed share the processor would not take back from a transfer already
-- paid out (amount positive); kind netted, what a transfer kept back to pay it (amount
-- negative; transfer_id is that carrier, status scheduled, paid or cancelled as its carrier).
-- source_key makes each cause count once.
CREATE TABLE payout_debts (
  id TEXT PRIMARY KEY,
  provider_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  job_id TEXT,
  transfer_id TEXT,
  source_key TEXT NOT NULL UNIQUE,
  amount_cents BIGINT NOT NULL,
  status TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX payout_debts_provider ON payout_debts (provider_id);

-- netted_cents: the balance a transfer paid off (besides its fee); debited_cents: what of a
-- refunded share the processor would not reverse, moved to the provider's balance instead.
ALTER TABLE payout_transfers ADD COLUMN netted_cents BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payout_transfers ADD COLUMN debited_cents BIGINT NOT NULL DEFAULT 0;

-- A member who cancelled Preferred Pro keeps it until premium_ends_at (the next month's start).
ALTER TABLE providers ADD COLUMN premium_ends_at BIGINT;

-- Reports are resolved by staff (status open or resolved, the action and note), and outlive
-- the customer's account for the dispute window: customer_id is cleared at erasure and
-- keep_until says when the report goes.
ALTER TABLE job_reports ALTER COLUMN customer_id DROP NOT NULL;
ALTER TABLE job_reports ADD COLUMN status TEXT NOT NULL DEFAULT 'open';
ALTER TABLE job_reports ADD COLUMN resolution TEXT;
ALTER TABLE job_reports ADD COLUMN resolution_note TEXT;
ALTER TABLE job_reports ADD COLUMN resolved_by TEXT;
ALTER TABLE job_reports ADD COLUMN resolved_at BIGINT;
ALTER TABLE job_reports ADD COLUMN keep_until BIGINT;
CREATE INDEX job_reports_customer ON job_reports (customer_id);
CREATE INDEX job_reports_list ON job_reports (status, created_at, id);
