-- The payouts' reconciliation makes the provider's transfer of money captured without one (a
-- payment PAID before payouts existed, or whose transfer was lost). It found them by reading
-- every PAID payment every 15 minutes; this table holds just them, kept by triggers: a payment
-- enters when it becomes PAID with no transfer and leaves when its transfer is made (the
-- capture's own transaction makes it, so a capture's row comes and goes there), when it is no
-- longer PAID, or when it is deleted; a transfer deleted puts its PAID payment back.
-- Written to run again (IF NOT EXISTS, OR REPLACE, ON CONFLICT): a test starts it over.
CREATE TABLE IF NOT EXISTS payments_without_transfer (
  payment_id TEXT PRIMARY KEY
);

INSERT INTO payments_without_transfer (payment_id)
SELECT p.id FROM payments p WHERE p.kind IN ('job', 'tip') AND p.status = 'PAID'
AND NOT EXISTS (SELECT 1 FROM payout_transfers t WHERE t.payment_id = p.id)
ON CONFLICT DO NOTHING;

CREATE OR REPLACE FUNCTION payments_paid_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' OR NEW.status <> 'PAID' THEN
    DELETE FROM payments_without_transfer WHERE payment_id = OLD.id;
  ELSIF NEW.kind IN ('job', 'tip') AND NOT EXISTS (SELECT 1 FROM payout_transfers WHERE payment_id = NEW.id) THEN
    INSERT INTO payments_without_transfer (payment_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER payments_paid_inserted AFTER INSERT ON payments
FOR EACH ROW WHEN (NEW.status = 'PAID') EXECUTE FUNCTION payments_paid_changed();
CREATE OR REPLACE TRIGGER payments_paid AFTER UPDATE OF status ON payments
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND (NEW.status = 'PAID' OR OLD.status = 'PAID'))
EXECUTE FUNCTION payments_paid_changed();
CREATE OR REPLACE TRIGGER payments_deleted_untransferred AFTER DELETE ON payments
FOR EACH ROW WHEN (OLD.status = 'PAID') EXECUTE FUNCTION payments_paid_changed();

CREATE OR REPLACE FUNCTION payout_transfers_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    DELETE FROM payments_without_transfer WHERE payment_id = NEW.payment_id;
  ELSE
    INSERT INTO payments_without_transfer (payment_id)
    SELECT id FROM payments WHERE id = OLD.payment_id AND status = 'PAID' AND kind IN ('job', 'tip')
    ON CONFLICT DO NOTHING;
  END IF;
  RETURN NULL;
END
$$;
CREATE OR REPLACE TRIGGER payout_transfers_made AFTER INSERT ON payout_transfers
FOR EACH ROW WHEN (NEW.payment_id IS NOT NULL) EXECUTE FUNCTION payout_transfers_changed();
CREATE OR REPLACE TRIGGER payout_transfers_removed AFTER DELETE ON payout_transfers
FOR EACH ROW WHEN (OLD.payment_id IS NOT NULL) EXECUTE FUNCTION payout_transfers_changed();
