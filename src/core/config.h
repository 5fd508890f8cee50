/* Configuration from the environment (decisions section 2), read once at start-up and
 * read-only afterwards, so every thread may read it without locking. */
#ifndef CORE_CONFIG_H
#define CORE_CONFIG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { ENV_DEVELOPMENT, ENV_TEST, ENV_PRODUCTION } app_env;

/* How long each kind of row that grows with time is kept before its owner's periodic task
 * deletes it (docs/operations.md, "Retention"), in milliseconds. */
typedef struct config_retention {
  int64_t events;      /* RETAIN_EVENTS: the live-update outbox (48h: 24 h past the replay window) */
  int64_t idempotency; /* RETAIN_IDEMPOTENCY: idempotency keys and their kept answers (24h) */
  int64_t rate_limits; /* RETAIN_RATE_LIMITS: rate-limit counters after their window started (1h) */
  int64_t queue;       /* RETAIN_QUEUE: finished background work (7d) */
  int64_t elevations;  /* RETAIN_ELEVATIONS: ended staff elevations (90d) */
  int64_t mail;        /* RETAIN_MAIL: development .eml files under $DATA_DIR/mail (7d) */
  int64_t sweep;       /* RETENTION_SWEEP: how often the pruning tasks run (1h) */
} config_retention;

typedef struct config {
  int port;
  char *bind;
  app_env env;
  char *data_dir;
  char *database_url;        /* "sqlite:PATH" or "postgres://..." */
  char *database_listen_url; /* PostgreSQL: where the live-update listener connects (a session, not a pooler) */
  char *jwt_secret;
  size_t jwt_secret_len;
  char *public_url;
  char *app_url;           /* APP_URL without its trailing slash; unset: PUBLIC_URL + "/app", the server's own pages */
  char *app_redirect_urls; /* APP_REDIRECT_URLS normalised: "https://app.example.com,myapp://" ("" when unset) */
  char *admin_email, *support_email, *mail_from;
  char *smtp_url; /* NULL: .eml files under $DATA_DIR/mail */
  char *bootstrap_admin_email, *bootstrap_admin_password;
  char *stripe_secret_key, *stripe_api_base, *stripe_webhook_secret, *stripe_premium_price_id;
  char *stripe_connect_webhook_secret; /* the Connect endpoint's (connected accounts' events); NULL: none */
  char *stripe_files_base;             /* Stripe's file uploads (dispute evidence): https://files.stripe.com */
  char *statement_descriptor_suffix;   /* STATEMENT_DESCRIPTOR_SUFFIX: after the account's prefix on card
                                          statements (at most 22 characters); NULL: none */
  char *s3_endpoint, *s3_bucket, *s3_region, *s3_access_key_id, *s3_secret_access_key;
  char *geocoder_url, *router_url, *weather_url, *push_url;
  char *metrics_token; /* NULL: GET /metrics answers loopback callers only */
  int bcrypt_cost;
  int bcrypt_threads, bcrypt_queue; /* password-hashing pool size and queue bound */
  int db_pool_size;                 /* connections of the database lane (and the main thread) */
  int db_slow_pool_size;            /* connections of the slow lane and background work */
  int db_busy_timeout_ms;           /* SQLite: how long a write waits for the write lock before 503 */
  int pg_prepared_statements;       /* PostgreSQL: 1 named prepared statements per connection, 0 unnamed ones
                                       (PgBouncer before 1.21 in transaction pooling) */
  int http_threads;                 /* MHD event threads */
  int http_stream_threads;          /* MHD event threads of the connections that carry event streams */
  int http_workers;                 /* handler threads of the database lane */
  int http_slow_workers;            /* handler threads of the slow lane (ROUTE_SLOW) */
  int queue_workers;
  int queue_lease_ms;         /* a claimed unit of work is free again this long after its last renewal (real clock) */
  int recognition_workers;    /* background workers for document recognition (nice 10) */
  int recognition_timeout_ms; /* recognition of one image or PDF page is stopped past this */
  int shutdown_grace_ms;      /* SIGTERM: how long requests in flight may take to finish */
  int http_idle_timeout;      /* seconds without traffic before a connection is closed */
  int http_header_timeout;    /* seconds from a request's first bytes to its last header */
  int http_body_min_rate;     /* bytes/s a body must average after that grace (0: none) */
  int http_max_header_bytes;  /* header fields over this answer 431 */
  int http_max_connections_per_ip; /* open connections per socket peer (0: no cap) */
  int http_max_connections;        /* open connections in all (live-update streams included) */
  int trust_proxy;                 /* proxies in front: the client is the Nth X-Forwarded-For address from the right */
  char *cors_origins;              /* comma-separated; "*" allows any */
  char *events_cookie_samesite;    /* Strict, Lax or None: the live updates' session cookie */
  char *audit_key;                 /* AUDIT_KEY (32 bytes or more); NULL: derived from JWT_SECRET */
  char *audit_checkpoint_file;     /* where checkpoints of the audit chain are appended */
  char *backup_dest;               /* BACKUP_DEST: a directory or s3://bucket/prefix; NULL: none */
  int64_t backup_interval_ms;      /* BACKUP_INTERVAL: scheduled backups' period; 0: off */
  int backup_keep;                 /* BACKUP_KEEP: scheduled backups kept at BACKUP_DEST */
  config_retention retain;         /* how long rows that grow with time are kept (RETAIN_*) */
} config;

/* The process-wide configuration; valid after config_load(). */
extern config CFG;

/* Reads the environment into CFG. Returns false with a message in err (256 bytes) when a
 * value is invalid or production lacks a strong JWT_SECRET. Creates DATA_DIR and, outside
 * production, a generated JWT secret kept in $DATA_DIR/jwt_secret. */
bool config_load(char err[256]);
/* "development", "test" or "production". */
const char *config_env_name(void);
/* Parses a duration: digits followed by ms, s, m, h or d ("90s", "15m", "1h", "7d"); false when
 * malformed or over 10 years. */
bool config_duration(const char *text, int64_t *ms);
/* True when the engine is PostgreSQL. */
bool config_is_postgres(void);

#endif
