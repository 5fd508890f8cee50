/* Crash injection for the crash-safety tests, in the manner of SQLite's fault injection:
 * with APP_ENV=test and CRASH_POINT=<name> in the environment, the process kills itself with
 * SIGKILL (no shutdown code runs, as in a power cut) the first time it reaches the point of
 * that name. Does nothing in any other environment. Thread-safe. */
#ifndef CORE_FAULTS_H
#define CORE_FAULTS_H

/* The named points, where a crash leaves work half done:
 *   accept-committed  a quote's acceptance is committed, its card authorization not made
 *   email-written     an email is in the outbox, its queue row not yet recorded done
 *   upload-received   an upload's files are on disk, nothing stored or recorded yet */
void fault_point(const char *name);

/* Race injection, for the tests of a race whose window is otherwise too short to hit: with
 * APP_ENV=test and PAUSE_POINT=<name>:<ms>, the calling thread sleeps ms every time it reaches
 * the point of that name. The named points:
 *   events-recipients-read  the pump read a round's recipients, before it writes the round out */
void fault_pause(const char *name);

/* Limit injection, for the tests of a limit's other side that would take too much to reach:
 * with APP_ENV=test and TEST_LIMIT=<name>:<n>, fault_limit(name, value) returns n instead of
 * value. The named limits:
 *   events-provider-list  the providers' streams the pump names when it reads a round's
 *                         recipients (past it, it reads every matching provider)
 *   prune-batch           the rows a retention prune deletes a transaction (500): the
 *                         outbox's events, finished background work, idempotency keys */
int fault_limit(const char *name, int value);

/* Plan audit, for the API pass's check that no statement reads a large table whole: with
 * APP_ENV=test and PLAN_LOG=<file>, the file SQLite's statements and their plans are appended
 * to as they are first prepared (src/db/sqlite.c); NULL otherwise. */
const char *fault_plan_log(void);

#endif
