/* The hub (events_hub.h). One mutex guards the table of streams, the list the timers walk and
 * the pump's position; the pump writes every event of a batch to its streams under it, so a
 * stream joining (events_hub_join, under the same mutex) sees the position move only between
 * batches and never misses or repeats an event. Writes to a stream only append to its buffer
 * (http/stream.h): nothing under the mutex waits on a client. The database is read without
 * the mutex. A stream's events are formatted once per event, not per stream. Events are read
 * and numbered by their position (events_store.c), which the pump gives first on PostgreSQL;
 * the id is only the outbox's key (a one-shot's record names its event by id).
 *
 * Streams are kept in buckets by recipient key; a bucket lists few streams for an account (at
 * most EVENTS_STREAMS_PER_ACCOUNT) and every stream of a staff role for "staff:<role>". */
#include "domain/events/events_hub.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/faults.h"
#include "core/jw.h"
#include "core/log.h"
#include "core/util.h"
#include "db/db.h"
#include "domain/events/events.h"
#include "domain/events/events_store.h"
#include "ext/digest.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUCKETS (1u << 16)
#define BATCH 256
#define IDLE_POLL_MS 1000 /* the pump reads the outbox at least this often, whatever woke it */
#define TICK_MS 500       /* heartbeats and expiries are looked at this often */
/* Rounds of the pump start at least this far apart. Each reads the outbox in a read
 * transaction of its own, which after a commit finds its page cache dropped: at a round per
 * commit the pump took a fifth of POST /quotes' CPU (issue 37). A round reads everything
 * committed since the last, so spacing them batches a burst's events into one read, for at
 * most this much latency (the live-updates goal is a p99 of 100 ms). */
#define PUMP_GAP_MS 5
#define RECHECKS 512  /* tokens checked again in one round (a second) at most */
#define ENDED_KEEP 64 /* tokens' ends remembered for the streams still joining */
#define ENDED_KEEP_MS 10000

struct ev_stream {
  hs_stream *s;
  char *recipient, *account; /* the key its events come to; "role:id" of its account */
  hs_auth auth;              /* its token's claims (the strings owned) */
  char names[3][65];         /* SHA-256 of its account's id, its token's, its elevation's ("": none) */
  int64_t exp_ms, next_beat, next_check;
  int64_t floor;                  /* events up to this position are not written to it (it has them) */
  uint64_t order;                 /* when it joined, for the per-account limit */
  bool joined;                    /* in the table: the pump writes to it */
  ev_stream *next, *prev;         /* in its bucket */
  ev_stream *all_next, *all_prev; /* in the list the timers walk */
  ev_stream *pro_next, *pro_prev; /* a provider's: in the providers' list the pump names */
};

/* A token's end the pump read (EVENTS_TOKENS_ENDED), kept a few seconds for the streams that
 * were authorized before it and join after it. */
typedef struct ended {
  char subject[65]; /* an id's SHA-256 */
  bool staff;
  int64_t at; /* clock_mono_ms() when read; 0: unused */
} ended;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;       /* the pump's */
  pthread_cond_t check_cv; /* the checker's */
  ev_stream **buckets;
  ev_stream *all;
  ev_stream *pros; /* the providers' streams joined, apart: the pump lists them every round */
  int64_t position;
  uint64_t joins;
  int providers; /* how many */
  bool woken, stopping, running, listening;
  bool spacing;   /* the pump waits out PUMP_GAP_MS: a commit marks it woken without a signal */
  bool place;     /* events may wait for a position (events_hub.h says when) */
  bool check_now; /* streams were made due for a check: the checker runs a round at once */
  ended ended[ENDED_KEEP];
  int ended_next;
  pthread_t pump, listener, checker;
} hub = {.mu = PTHREAD_MUTEX_INITIALIZER};

static const events_oneshot *oneshots[4];
static int noneshots;

void events_register_oneshot(const events_oneshot *o) {
  if (noneshots < (int)ARRAY_LEN(oneshots)) oneshots[noneshots++] = o;
}

const events_oneshot *events_hub_oneshot_at(int i) { return i < noneshots ? oneshots[i] : NULL; }

const events_oneshot *events_hub_oneshot(const char *kind) {
  for (int i = 0; i < noneshots; i++)
    if (!strcmp(oneshots[i]->kind, kind)) return oneshots[i];
  return NULL;
}

/* ---- the stream protocol ---- */

void events_format(struct buf *out, int64_t id, const char *kind, const char *data) {
  if (id > 0) buf_addf(out, "id: %lld\n", (long long)id);
  if (kind) buf_addf(out, "event: %s\n", kind);
  /* a data line per line of data (the JSON the service writes has none, but a line break in it
   * must not end the event) */
  for (const char *p = data; p;) {
    const char *nl = strchr(p, '\n');
    size_t n = nl ? (size_t)(nl - p) : strlen(p);
    buf_add(out, "data: ");
    buf_addn(out, p, n);
    buf_add(out, "\n");
    p = nl ? nl + 1 : NULL;
  }
  if (buf_add(out, "\n") != BUF_OK) oom(); /* a failure sticks: one look at the end */
}

/* Writes a final event to es and ends it; the hub stops writing to it. mu held. */
static void finish(ev_stream *es, const char *kind, const char *data);

/* ---- the table ---- */

static unsigned bucket_of(const char *key) { return (unsigned)(fnv1a(FNV1A_BASIS, key) & (BUCKETS - 1)); }

static bool is_provider(const ev_stream *es) { return !strncmp(es->recipient, "provider:", 9); }

static void unjoin(ev_stream *es) {
  if (!es->joined) return;
  es->joined = false;
  if (is_provider(es)) {
    hub.providers--;
    if (es->pro_prev) es->pro_prev->pro_next = es->pro_next;
    if (es->pro_next) es->pro_next->pro_prev = es->pro_prev;
    if (hub.pros == es) hub.pros = es->pro_next;
    es->pro_next = es->pro_prev = NULL;
  }
  unsigned b = bucket_of(es->recipient);
  if (es->prev) es->prev->next = es->next;
  if (es->next) es->next->prev = es->prev;
  if (hub.buckets[b] == es) hub.buckets[b] = es->next;
  if (es->all_prev) es->all_prev->all_next = es->all_next;
  if (es->all_next) es->all_next->all_prev = es->all_prev;
  if (hub.all == es) hub.all = es->all_next;
  es->next = es->prev = es->all_next = es->all_prev = NULL;
}

static void finish(ev_stream *es, const char *kind, const char *data) {
  struct buf b;
  buf_init(&b, BUF_CAP_MAX);
  events_format(&b, 0, kind, data);
  hs_stream_write(es->s, buf_ptr(&b), buf_len(&b));
  buf_free(&b);
  hs_stream_end(es->s);
  unjoin(es);
}

static void stream_closed(void *arg, hs_stream *s) {
  ev_stream *es = arg;
  pthread_mutex_lock(&hub.mu);
  unjoin(es);
  pthread_mutex_unlock(&hub.mu);
  hs_stream_release(s);
  free(es->recipient), free(es->account);
  free((char *)es->auth.id), free((char *)es->auth.role), free((char *)es->auth.elevation_id);
  free((char *)es->auth.token_id);
  free(es);
}

static void stream_stopping(void *arg, hs_stream *s) {
  ev_stream *es = arg;
  pthread_mutex_lock(&hub.mu);
  if (es->joined)
    finish(es, "shutdown", "{}");
  else
    hs_stream_end(s); /* still replaying: it ends with what it has */
  pthread_mutex_unlock(&hub.mu);
}

static const hs_stream_owner OWNER = {stream_closed, stream_stopping};

/* A reader that has not taken this much is cut, and catches up when it reconnects. */
#define MAX_BACKLOG (1024 * 1024)

ev_stream *events_hub_stream(hs_req *req, const char *recipient) {
  ev_stream *es = xcalloc(1, sizeof *es);
  const hs_auth *au = &req->auth;
  es->recipient = xstrdup(recipient);
  es->auth = *au;
  es->auth.id = xstrdup(au->id), es->auth.role = xstrdup(au->role);
  es->auth.elevation_id = au->elevation_id ? xstrdup(au->elevation_id) : NULL;
  es->auth.token_id = au->token_id ? xstrdup(au->token_id) : NULL;
  const char *named[3] = {au->id, au->token_id, au->elevation_id};
  for (int i = 0; i < 3; i++)
    if (named[i] && *named[i]) sha256_hex(named[i], strlen(named[i]), es->names[i]);
  char key[EVENTS_KEY_MAX];
  events_key(key, au->role, au->id);
  es->account = xstrdup(key);
  es->exp_ms = au->token_exp * 1000;
  es->s = hs_stream_open(req, "text/event-stream", MAX_BACKLOG, &OWNER, es);
  return es;
}

hs_stream *events_hub_http(ev_stream *es) { return es->s; }

int64_t events_hub_position(void) {
  pthread_mutex_lock(&hub.mu);
  int64_t at = hub.position;
  pthread_mutex_unlock(&hub.mu);
  return at;
}

/* The per-account limit: the oldest of es's siblings go while there are too many. mu held. */
static void make_room(ev_stream *es) {
  for (;;) {
    int n = 0;
    ev_stream *oldest = NULL;
    for (ev_stream *x = hub.buckets[bucket_of(es->recipient)]; x; x = x->next)
      if (!strcmp(x->account, es->account)) {
        n++;
        if (!oldest || x->order < oldest->order) oldest = x;
      }
    if (n < EVENTS_STREAMS_PER_ACCOUNT) return;
    finish(oldest, "replaced", "{}");
  }
}

/* ---- tokens that ended ---- */

/* Whether the token's end e concerns es's token. */
static bool names(const ev_stream *es, const ended *e) {
  for (int i = 0; i < 3; i++)
    if (es->names[i][0] && !strcmp(es->names[i], e->subject)) return true;
  return e->staff && es->auth.elevation_id;
}

/* es's token is checked again in the checker's next round, which runs at once. mu held. */
static void check_soon(ev_stream *es) {
  es->next_check = 0;
  hub.check_now = true;
  pthread_cond_signal(&hub.check_cv);
}

/* The pump read a token's end (its event's data): the streams it names are checked again at
 * once, and it is kept for those that join within ENDED_KEEP_MS. mu held. */
static void token_ended(const char *data) {
  json_t *d = json_loads(data, 0, NULL);
  const char *subject = json_string_value(json_object_get(d, "subject"));
  if (subject) {
    ended *e = &hub.ended[hub.ended_next];
    hub.ended_next = (hub.ended_next + 1) % ENDED_KEEP;
    snprintf(e->subject, sizeof e->subject, "%s", subject);
    e->staff = json_is_true(json_object_get(d, "staff"));
    e->at = clock_mono_ms();
    for (ev_stream *es = hub.all; es; es = es->all_next)
      if (names(es, e)) check_soon(es);
  }
  json_decref(d);
}

bool events_hub_join(ev_stream *es, int64_t at, const char *first, int64_t floor) {
  pthread_mutex_lock(&hub.mu);
  es->floor = floor;
  bool now = hub.position == at;
  if (now) {
    make_room(es);
    if (first) hs_stream_write(es->s, first, strlen(first));
    unsigned b = bucket_of(es->recipient);
    es->next = hub.buckets[b];
    if (es->next) es->next->prev = es;
    hub.buckets[b] = es;
    es->all_next = hub.all;
    if (hub.all) hub.all->all_prev = es;
    hub.all = es;
    es->joined = true;
    if (is_provider(es)) {
      hub.providers++;
      es->pro_next = hub.pros;
      if (hub.pros) hub.pros->pro_prev = es;
      hub.pros = es;
    }
    es->order = ++hub.joins;
    es->next_beat = clock_now_ms() + EVENTS_HEARTBEAT_MS;
    es->next_check = clock_now_ms() + EVENTS_RECHECK_MS;
    /* its token was checked before it joined: a token's end read since is checked again */
    int64_t since = clock_mono_ms() - ENDED_KEEP_MS;
    for (int i = 0; i < ENDED_KEEP; i++)
      if (hub.ended[i].at && hub.ended[i].at >= since && names(es, &hub.ended[i])) check_soon(es);
  }
  pthread_mutex_unlock(&hub.mu);
  return now;
}

/* ---- the pump ---- */

/* Wakes the pump; place: events may wait for a position. */
static void wake(bool place) {
  pthread_mutex_lock(&hub.mu);
  hub.woken = true;
  hub.place |= place;
  pthread_cond_signal(&hub.cv);
  pthread_mutex_unlock(&hub.mu);
}

/* "user:<id>" -> role "user", id; false for other keys. */
static bool account_key(const char *key, char role[16], const char **id) {
  const char *colon = strchr(key, ':');
  if (!colon || colon - key >= 16 || !strncmp(key, "staff:", 6)) return false;
  memcpy(role, key, (size_t)(colon - key));
  role[colon - key] = 0;
  *id = colon + 1;
  return true;
}

/* A one-shot event that reached a stream of its account, to clear after the batch. */
typedef struct delivered {
  const events_oneshot *kind;
  char role[16];
  const char *account_id;
  int64_t id; /* the event's id (not its position) */
} delivered;

/* Writes the events of one batch to the streams of their recipients (to: none when NULL), and
 * moves the position. Returns how many one-shot deliveries it recorded in out (at most cap).
 * mu held. */
static int fan_out(const db_res *ev, const db_res *to, delivered *out, int cap) {
  int nout = 0, r = 0, nto = to ? to->rows : 0;
  struct buf text;
  buf_init(&text, BUF_CAP_MAX);
  for (int i = 0; i < ev->rows; i++) {
    int64_t pos = db_int(ev, i, 0);
    if (!strcmp(db_text(ev, i, 1), EVENTS_TOKENS_ENDED)) { /* for nobody: no recipient rows */
      token_ended(db_text(ev, i, 2));
      hub.position = pos;
      continue;
    }
    const events_oneshot *once = events_hub_oneshot(db_text(ev, i, 1));
    buf_reset(&text);
    events_format(&text, pos, db_text(ev, i, 1), db_text(ev, i, 2));
    while (r < nto && db_int(to, r, 0) < pos) r++; /* in step with the events */
    for (; r < nto && db_int(to, r, 0) == pos; r++) {
      const char *key = db_text(to, r, 1);
      bool reached = false;
      for (ev_stream *es = hub.buckets[bucket_of(key)], *next; es; es = next) {
        next = es->next;
        if (strcmp(es->recipient, key) || pos <= es->floor) continue;
        if (hs_stream_write(es->s, buf_ptr(&text), buf_len(&text)))
          reached = true;
        else
          unjoin(es); /* cut (its reader fell too far behind) or over */
      }
      if (once && reached && nout < cap && account_key(key, out[nout].role, &out[nout].account_id))
        out[nout].kind = once, out[nout++].id = db_int(ev, i, 3);
    }
    hub.position = pos;
  }
  buf_free(&text);
  return nout;
}

/* The providers' streams the pump names in its read of a round's recipients, at most; past
 * it, it reads every provider matching an open job's event. With the list the read looks up
 * each event's ZIP for each listed provider (events_store.c), so its cost grows with the list;
 * every matching provider cost the pump 0.7 ms a round in POST /quotes' benchmark (64 a job,
 * one provider's stream joined), and a busy ZIP has more. */
#define PROVIDER_LIST_MAX 32

/* Which providers matching an open job's event a round's read wants: none (*providers false)
 * with no provider's stream joined here, those with a stream here (*among, a JSON array of
 * their ids), or past PROVIDER_LIST_MAX streams all of them (*among NULL). mu held. */
static void wanted_providers(arena *a, bool *providers, const char **among) {
  *providers = hub.providers > 0;
  *among = NULL;
  if (!*providers || hub.providers > fault_limit("events-provider-list", PROVIDER_LIST_MAX)) return;
  jw w;
  jw_init(&w, a, (size_t)hub.providers * 32);
  jw_arr(&w);
  for (ev_stream *es = hub.pros; es; es = es->pro_next) jw_str(&w, es->recipient + 9);
  jw_arr_end(&w);
  *among = jw_text(&w);
}

/* The recipients of the events in (after, last] that a stream here may want: none read when
 * no stream is joined (the events still move the position and carry the tokens' ends), and of
 * the providers matching an open job's event (a snowstorm's job matches thousands) only those
 * wanted_providers names. Read again when a stream joined meanwhile: it joined at the position
 * before these events and is owed them. Returns with mu held, *to NULL when none were read;
 * false (mu not held) on a failure, logged. */
static bool read_recipients(arena *a, int64_t after, int64_t last, db_res **to) {
  *to = NULL;
  pthread_mutex_lock(&hub.mu);
  while (hub.all) {
    uint64_t joins = hub.joins;
    bool providers;
    const char *among;
    wanted_providers(a, &providers, &among);
    pthread_mutex_unlock(&hub.mu);
    if (events_store_recipients(a, after, last, providers, among, to) != ERR_OK) return false;
    fault_pause("events-recipients-read");
    pthread_mutex_lock(&hub.mu);
    if (hub.joins == joins) break;
  }
  return true;
}

/* Reads and writes out everything positioned after the position. */
static void deliver_new(void) {
  arena a;
  arena_init(&a);
  for (;;) {
    int64_t after = events_hub_position(); /* only this thread moves it */
    db_res *ev, *to;
    if (events_store_batch(&a, after, BATCH, &ev) != ERR_OK) break; /* logged; the next wake tries again */
    if (ev->rows == 0) break;
    if (!read_recipients(&a, after, db_int(ev, ev->rows - 1, 0), &to)) break;
    delivered done[BATCH];
    int n = fan_out(ev, to, done, BATCH);
    pthread_mutex_unlock(&hub.mu);
    for (int i = 0; i < n; i++) done[i].kind->delivered(done[i].role, done[i].account_id, done[i].id);
    bool more = ev->rows == BATCH;
    arena_fini(&a);
    arena_init(&a);
    if (!more) break;
  }
  arena_fini(&a);
}

/* Heartbeats and expired tokens, by the service clock. */
static void tick(void) {
  int64_t now = clock_now_ms();
  static const char beat[] = ": keep-alive\n";
  pthread_mutex_lock(&hub.mu);
  for (ev_stream *es = hub.all, *next; es; es = next) {
    next = es->all_next;
    if (now >= es->exp_ms) {
      finish(es, "token.expired", "{}");
    } else if (now >= es->next_beat) {
      es->next_beat = now + EVENTS_HEARTBEAT_MS;
      if (!hs_stream_write(es->s, beat, sizeof beat - 1)) unjoin(es);
    }
  }
  pthread_mutex_unlock(&hub.mu);
}

static void *pump_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "events-pump");
  db_use_pool(DB_POOL_SLOW);
  db_plan_each_run(); /* the outbox grows from empty in a burst */
  int64_t last_tick = 0, last_round = 0, last_look = 0, waiting = 0;
  for (;;) {
    pthread_mutex_lock(&hub.mu);
    if (!hub.woken && !hub.stopping)
      clock_cond_wait_ms(&hub.cv, &hub.mu, TICK_MS < IDLE_POLL_MS ? TICK_MS : IDLE_POLL_MS);
    hub.spacing = true;
    for (int64_t left; !hub.stopping && (left = last_round + PUMP_GAP_MS - clock_mono_ms()) > 0;)
      clock_cond_wait_ms(&hub.cv, &hub.mu, left);
    hub.spacing = false;
    last_round = clock_mono_ms();
    bool stop = hub.stopping, place = hub.place;
    hub.woken = hub.place = false;
    pthread_mutex_unlock(&hub.mu);
    if (stop) break;
    /* once a second, rows still waiting since the last look (their writer stopped before its
     * pump positioned them) are positioned here */
    if (!place && last_round - last_look >= IDLE_POLL_MS) {
      int64_t oldest = 0;
      events_store_unplaced(&oldest);
      place = oldest && waiting && oldest <= waiting;
      waiting = oldest, last_look = last_round;
    }
    /* what was committed since gets its positions first (PostgreSQL; a failure is logged, and
     * the rows are found waiting at the looks above), and the other instances are told in the
     * same transaction: one NOTIFY for every commit found since the last (sent by a write
     * transaction itself, PostgreSQL's commit-time notify lock made them wait for each other) */
    bool more = false;
    if (place) events_store_place(&more);
    deliver_new();
    if (more) wake(true); /* a full batch was positioned: the next round at once */
    if (clock_mono_ms() - last_tick >= TICK_MS) {
      tick();
      last_tick = clock_mono_ms();
    }
  }
  return NULL;
}

/* ---- tokens checked again ---- */

/* A stream due for a check, copied out (the check runs without the hub's lock). */
typedef struct recheck {
  ev_stream *es;
  uint64_t order; /* with es, names the stream: a pointer alone may be a new stream's */
  hs_auth auth;
  char id[64], role[32], elevation[64], token_id[72];
  bool refused;
} recheck;

/* Up to cap streams due for a check, copied into out; their next check is moved on. */
static int due_checks(recheck *out, int cap) {
  int n = 0;
  int64_t now = clock_now_ms();
  pthread_mutex_lock(&hub.mu);
  for (ev_stream *es = hub.all; es && n < cap; es = es->all_next) {
    if (now < es->next_check) continue;
    es->next_check = now + EVENTS_RECHECK_MS;
    recheck *r = &out[n++];
    r->es = es, r->order = es->order, r->auth = es->auth, r->refused = false;
    snprintf(r->id, sizeof r->id, "%s", es->auth.id);
    snprintf(r->role, sizeof r->role, "%s", es->auth.role);
    snprintf(r->elevation, sizeof r->elevation, "%s", es->auth.elevation_id ? es->auth.elevation_id : "");
    snprintf(r->token_id, sizeof r->token_id, "%s", es->auth.token_id ? es->auth.token_id : "");
    r->auth.id = r->id, r->auth.role = r->role, r->auth.elevation_id = es->auth.elevation_id ? r->elevation : NULL;
    r->auth.token_id = es->auth.token_id ? r->token_id : NULL;
  }
  pthread_mutex_unlock(&hub.mu);
  return n;
}

/* Ends the refused streams that are still joined. */
static void end_refused(const recheck *r, int n) {
  pthread_mutex_lock(&hub.mu);
  for (int i = 0; i < n; i++) {
    if (!r[i].refused) continue;
    for (ev_stream *es = hub.all; es; es = es->all_next)
      if (es == r[i].es && es->order == r[i].order) {
        finish(es, "token.expired", "{}");
        break;
      }
  }
  pthread_mutex_unlock(&hub.mu);
}

static bool stopping_now(void) {
  pthread_mutex_lock(&hub.mu);
  bool stop = hub.stopping;
  pthread_mutex_unlock(&hub.mu);
  return stop;
}

static void *checker_main(void *arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "events-check");
  db_use_pool(DB_POOL_SLOW);
  recheck *batch = xmalloc(sizeof *batch * RECHECKS);
  while (!stopping_now()) {
    int n = due_checks(batch, RECHECKS), refused = 0;
    for (int i = 0; i < n; i++) refused += batch[i].refused = hs_token_recheck(&batch[i].auth) == ERR_UNAUTHORIZED;
    if (refused) end_refused(batch, n);
    pthread_mutex_lock(&hub.mu);
    /* a round a second, or at once when a token's end made streams due (or more are due) */
    if (!hub.stopping && !hub.check_now && n < RECHECKS) clock_cond_wait_ms(&hub.check_cv, &hub.mu, 1000);
    hub.check_now = false;
    pthread_mutex_unlock(&hub.mu);
  }
  free(batch);
  return NULL;
}

/* PostgreSQL: wakes the pump on every NOTIFY of the channel, and when the listening connection
 * was made again (what was sent meanwhile is read from the outbox all the same, and positioned
 * first: its senders' notices were lost). */
static void *listener_main(void *arg) {
  db_listener *l = arg;
  pthread_setname_np(pthread_self(), "events-listen");
  bool bare;
  for (int heard; !stopping_now();)
    if ((heard = db_listen_wait(l, 250, &bare)) != 0) wake(heard < 0 || bare);
  db_listen_close(l);
  return NULL;
}

void events_hub_committed(void *unused) {
  (void)unused;
  pthread_mutex_lock(&hub.mu);
  hub.woken = hub.place = true;
  if (!hub.spacing) pthread_cond_signal(&hub.cv);
  pthread_mutex_unlock(&hub.mu);
}

bool events_hub_running(void) { return __atomic_load_n(&hub.running, __ATOMIC_ACQUIRE); }

void events_hub_start(void) {
  if (!hub.buckets) hub.buckets = xcalloc(BUCKETS, sizeof *hub.buckets);
  clock_cond_init(&hub.cv);
  clock_cond_init(&hub.check_cv);
  int64_t at = 0;
  if (events_store_position(&at) != ERR_OK) log_msg(LOG_ERROR, "events: the outbox could not be read; starting at 0");
  hub.position = at;
  hub.stopping = false;
  if (pthread_create(&hub.pump, NULL, pump_main, NULL) != 0 ||
      pthread_create(&hub.checker, NULL, checker_main, NULL) != 0)
    die("events: cannot start the hub's threads");
  db_listener *l = db_listen_open(EVENTS_CHANNEL);
  if (l && pthread_create(&hub.listener, NULL, listener_main, l) != 0) die("events: cannot start the listener");
  hub.listening = l != NULL;
  __atomic_store_n(&hub.running, true, __ATOMIC_RELEASE);
}

void events_hub_stop(void) {
  if (!hub.running) return;
  pthread_mutex_lock(&hub.mu);
  hub.stopping = true;
  pthread_cond_signal(&hub.cv);
  pthread_cond_signal(&hub.check_cv);
  pthread_mutex_unlock(&hub.mu);
  pthread_join(hub.pump, NULL);
  pthread_join(hub.checker, NULL);
  if (hub.listening) pthread_join(hub.listener, NULL);
  __atomic_store_n(&hub.running, false, __ATOMIC_RELEASE);
}
