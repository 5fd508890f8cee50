/* Password hashing (bcrypt through libcrypt) on a bounded pool.
 *
 * bcrypt at cost 12 takes about 250 ms of a core, so it never runs on a request thread: the
 * caller submits the work to a small pool of low-priority threads and waits. When the
 * pool's queue is full the call fails at once with PW_BUSY (the route answers 503 with
 * Retry-After), so a login flood cannot starve other routes. */
#ifndef EXT_PASSWORD_H
#define EXT_PASSWORD_H
#include <stdbool.h>

typedef enum { PW_OK = 0, PW_MISMATCH, PW_BUSY, PW_ERROR } pw_result;

/* Starts `threads` hashing threads with room for `queue` waiting requests. */
void password_pool_start(int threads, int queue, int cost);
/* Stops the pool after the queued work finishes. */
void password_pool_stop(void);
/* True when a request submitted now would be refused (every worker busy, the queue full).
 * Lets a route answer 503 before doing any other work. */
bool password_pool_full(void);
/* Hashes password into out (128 bytes, "$2b$..."). */
pw_result password_hash(const char *password, char out[128]);
/* Checks password against hash. A NULL hash (unknown account) is checked against a dummy
 * hash of the same cost, so it takes as long and returns PW_MISMATCH. */
pw_result password_verify(const char *password, const char *hash);
/* For metrics: tasks waiting for a hashing thread, threads hashing now, requests refused
 * because every thread was busy and the queue full, and bcrypt computations done (hashes and
 * checks, an unknown account's dummy check included), both since start. */
void password_pool_stats(int *waiting, int *busy, long *refused, long *computed);
/* Hashes synchronously on the calling thread (CLI use only). */
bool password_hash_now(const char *password, int cost, char out[128]);

#endif
