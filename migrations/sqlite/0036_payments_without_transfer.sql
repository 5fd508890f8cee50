-- The payouts' reconciliation makes the provider's transfer of money captured without one (a
-- payment PAID before payouts existed, or whose transfer was lost). It found them by reading
-- every PAID payment every 15 minutes; this table holds just them, kept by triggers: a payment
-- enters when it becomes PAID with no transfer and leaves when its transfer is made (the
-- capture's own transaction makes it, so a capture's row comes and goes there), when it is no
-- longer PAID, or when it is deleted; a transfer deleted puts its PAID payment back.
-- Written to run again (IF NOT EXISTS, OR IGNORE): a test starts it over.
CREATE TABLE IF NOT EXISTS payments_without_transfer (
  payment_id TEXT PRIMARY KEY
) WITHOUT ROWID;

INSERT OR IGNORE INTO payments_without_transfer (payment_id)
SELECT p.id FROM payments p WHERE p.kind IN ('job', 'tip') AND p.status = 'PAID'
AND NOT EXISTS (SELECT 1 FROM payout_transfers t WHERE t.payment_id = p.id);

CREATE TRIGGER IF NOT EXISTS payments_paid_inserted AFTER INSERT ON payments
WHEN NEW.status = 'PAID' AND NEW.kind IN ('job', 'tip')
BEGIN
  INSERT OR IGNORE INTO payments_without_transfer (payment_id)
  SELECT NEW.id WHERE NOT EXISTS (SELECT 1 FROM payout_transfers WHERE payment_id = NEW.id);
END;

CREATE TRIGGER IF NOT EXISTS payments_paid AFTER UPDATE OF status ON payments
WHEN NEW.status = 'PAID' AND OLD.status <> 'PAID' AND NEW.kind IN ('job', 'tip')
BEGIN
  INSERT OR IGNORE INTO payments_without_transfer (payment_id)
  SELECT NEW.id WHERE NOT EXISTS (SELECT 1 FROM payout_transfers WHERE payment_id = NEW.id);
END;

CREATE TRIGGER IF NOT EXISTS payments_unpaid AFTER UPDATE OF status ON payments
WHEN OLD.status = 'PAID' AND NEW.status <> 'PAID'
BEGIN
  DELETE FROM payments_without_transfer WHERE payment_id = NEW.id;
END;

CREATE TRIGGER IF NOT EXISTS payments_deleted_untransferred AFTER DELETE ON payments WHEN OLD.status = 'PAID'
BEGIN
  DELETE FROM payments_without_transfer WHERE payment_id = OLD.id;
END;

CREATE TRIGGER IF NOT EXISTS payout_transfers_made AFTER INSERT ON payout_transfers
WHEN NEW.payment_id IS NOT NULL
BEGIN
  DELETE FROM payments_without_transfer WHERE payment_id = NEW.payment_id;
END;

CREATE TRIGGER IF NOT EXISTS payout_transfers_removed AFTER DELETE ON payout_transfers
WHEN OLD.payment_id IS NOT NULL
BEGIN
  INSERT OR IGNORE INTO payments_without_transfer (payment_id)
  SELECT id FROM payments WHERE id = OLD.payment_id AND status = 'PAID' AND kind IN ('job', 'tip');
END;
