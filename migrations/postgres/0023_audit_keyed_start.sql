-- Issue 31: where the audit chain's keyed records start, so that `audit verify` refuses a
-- record hashed the old way (plain SHA-256, before migration 0014 keyed the chain) at or after
-- that point. Until now a plain hash was accepted up to the first keyed record, so a chain
-- rewritten entirely in the plain form, which needs no key, verified. The next record this
-- database gets is appended by a keyed binary: keyed_from is the tip's next position (1 for an
-- empty chain). Records before it keep the old rule: plain ones only before the first keyed one.
ALTER TABLE audit_tip ADD COLUMN keyed_from BIGINT NOT NULL DEFAULT 1;
UPDATE audit_tip SET keyed_from = seq + 1 WHERE id = 1;
