-- Lookups that read a whole table (every statement the SQLite API pass prepares was planned
-- without statistics, as the service runs: docs/performance-history.md section 25):
-- - a subscription event finds its customer by subscription or processor customer: every
--   users row was read, in the writer's transaction;
-- - the reconciliations find the payments and transfers whose processor call is pending
--   (`pending_op IS NOT NULL`): SQLite read every payment, and every transfer, each time; the
--   partial indexes hold only those rows, and a settled row leaves them;
-- - deleting a job (an account's erasure) read every recurring request for its foreign key;
--   an account's export and erasure read every review and recurring request for its own.
CREATE INDEX users_subscription ON users (processor_subscription_id) WHERE processor_subscription_id IS NOT NULL;
CREATE INDEX users_processor_customer ON users (processor_customer_id) WHERE processor_customer_id IS NOT NULL;
DROP INDEX payments_pending;
CREATE INDEX payments_pending ON payments (pending_op, op_started_at) WHERE pending_op IS NOT NULL;
DROP INDEX payout_transfers_pending;
CREATE INDEX payout_transfers_pending ON payout_transfers (pending_op, op_started_at) WHERE pending_op IS NOT NULL;
CREATE INDEX recurring_requests_job ON recurring_requests (job_id);
CREATE INDEX recurring_requests_customer ON recurring_requests (customer_id);
CREATE INDEX recurring_requests_provider ON recurring_requests (provider_id);
CREATE INDEX reviews_customer ON reviews (customer_id);
