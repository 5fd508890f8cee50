-- The reconciliation's reads through indexes that hold only the rows it looks for, so that it
-- reads neither every payment nor every transfer every 15 minutes (docs/performance-history.md
-- section 26); a row leaves its index once it is settled:
-- - released payments with money still to give back (a job's earlier acceptance, captured);
-- - paid transfers whose provider's share went down since (a refund) and is not reversed yet.
CREATE INDEX payments_released ON payments (status, released_at)
  WHERE released_at IS NOT NULL AND status = 'PAID' AND refunded_cents < amount_cents;
CREATE INDEX payout_transfers_reversal_due ON payout_transfers (status, processor_transfer_id)
  WHERE pending_op IS NULL AND status = 'paid' AND processor_transfer_id IS NOT NULL
  AND sent_cents - reversed_cents - debited_cents > amount_cents - fee_cents - netted_cents;
