/* Worker lanes: the threads that run handlers which may block, so the few event threads that
 * own the sockets never wait. A request is queued on a lane (its connection suspended), run by
 * one of the lane's workers, and handed back to its connection; an answer to hold back
 * (hs_req.delay_ms) waits on one timer thread instead of a worker. The lanes know requests
 * only as hs_work items embedded in the server's per-request context, and reach them through
 * the callbacks given at start. */
#ifndef HTTP_LANES_H
#define HTTP_LANES_H
#include <stdbool.h>
#include <stdint.h>

/* The database lane (handlers that wait only on the database; as many workers as the pool has
 * connections) and the slow lane (uploads and ROUTE_SLOW handlers). */
typedef enum { HS_LANE_DB, HS_LANE_SLOW, HS_LANE_COUNT } hs_lane_id;

/* A request as a lane sees it; embedded in the caller's per-request context. */
typedef struct hs_work {
  struct hs_work *next; /* in a lane's queue, then in the held list */
  int64_t release_at;   /* held: when to hand it back (clock_mono_ms) */
} hs_work;

typedef struct hs_lane_ops {
  /* On a worker: runs the request; returns how long to hold its answer back (ms, 0: none). */
  int (*run)(hs_work *w);
  /* Hands the answered request back to its connection; from any thread. */
  void (*resume)(hs_work *w);
  /* Stops the connection's processing until resume; called with the lane locked, before any
   * worker can take w. */
  void (*suspend)(hs_work *w);
  /* A queued request that will not run (the server is stopping): answers it 503. resume
   * follows. */
  void (*refuse)(hs_work *w);
} hs_lane_ops;

/* Starts the timer thread and the workers of both lanes (ops copied). */
void hs_lanes_start(const hs_lane_ops *ops, int db_workers, int slow_workers);
/* Queues w on lane (suspended through ops.suspend); false, without suspending, when the lane
 * is stopping: the caller answers the request itself. */
bool hs_lane_push(hs_lane_id lane, hs_work *w);
/* Workers inside a handler now (a snapshot). */
int hs_lanes_busy(void);
/* Stops taking work: what waits in the lanes is refused and resumed at once, held answers are
 * released, the timer thread ends. Returns before the workers have ended (hs_lanes_join). */
void hs_lanes_cancel(void);
/* Joins the workers of both lanes; call once no handler runs. */
void hs_lanes_join(void);

#endif
