-- The reconciliation looks for released payments with money still to give back (a job's
-- earlier acceptance, captured): these rows only, so that it reads neither every payment nor
-- every PAID one (docs/performance-history.md section 26). A row leaves the index once its
-- refund is made.
CREATE INDEX payments_released ON payments (status, released_at)
  WHERE released_at IS NOT NULL AND status = 'PAID' AND refunded_cents < amount_cents;
