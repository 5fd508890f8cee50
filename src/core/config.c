/* Environment variables to CFG, with the defaults of decisions section 2. */
#include "core/config.h"
#include "core/ids.h"
#include "core/util.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

config CFG;

static char *env_or(const char *name, const char *fallback) {
  const char *v = getenv(name);
  if (v && *v) return xstrdup(v);
  return fallback ? xstrdup(fallback) : NULL;
}

static bool env_int(const char *name, int fallback, int lo, int hi, int *out, char err[256]);

bool config_duration(const char *text, int64_t *ms) {
  static const struct {
    const char *unit;
    int64_t ms;
  } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"h", 3600 * 1000}, {"d", 24 * 3600 * 1000}};
  char *end;
  errno = 0;
  if (!text || !isdigit((unsigned char)*text)) return false;
  long long n = strtoll(text, &end, 10);
  if (errno || n > 10LL * 366 * 24 * 3600 * 1000) return false;
  for (size_t i = 0; i < ARRAY_LEN(units); i++)
    if (!strcmp(end, units[i].unit)) {
      if (n > 10LL * 366 * 24 * 3600 * 1000 / units[i].ms) return false;
      *ms = n * units[i].ms;
      return true;
    }
  return false;
}

/* A duration setting: fallback when unset; lo..hi; below the fallback only outside production
 * (where a shortened retention serves tests and soaks; production keeps the promises). */
static bool env_duration(const char *name, int64_t fallback, int64_t lo, int64_t *out, char err[256]) {
  const char *v = getenv(name);
  if (!v || !*v) {
    *out = fallback;
    return true;
  }
  if (!config_duration(v, out) || *out < lo) {
    snprintf(err, 256, "%s must be a duration such as 90s, 15m, 1h or 7d (at least %lld ms)", name, (long long)lo);
    return false;
  }
  if (CFG.env == ENV_PRODUCTION && *out < fallback && fallback > 0) {
    snprintf(err, 256, "%s below its default is refused in production", name);
    return false;
  }
  return true;
}

/* Backups and retention (docs/operations.md). */
static bool load_backup_and_retention(char err[256]) {
  CFG.backup_dest = env_or("BACKUP_DEST", NULL);
  const char *interval = getenv("BACKUP_INTERVAL");
  CFG.backup_interval_ms = 0;
  if (interval && *interval && strcmp(interval, "off") && strcmp(interval, "0")) {
    if (!config_duration(interval, &CFG.backup_interval_ms) || CFG.backup_interval_ms < 1000) {
      snprintf(err, 256, "BACKUP_INTERVAL must be off or a duration such as 1h (at least 1s)");
      return false;
    }
    if (!CFG.backup_dest) {
      snprintf(err, 256, "BACKUP_INTERVAL needs BACKUP_DEST (a directory or s3://bucket/prefix)");
      return false;
    }
  }
  if (!env_int("BACKUP_KEEP", 24, 1, 100000, &CFG.backup_keep, err)) return false;
  static const struct {
    const char *name;
    int64_t fallback;
    int64_t *into;
  } retain[] = {
      {"RETAIN_EVENTS", 48LL * 3600 * 1000, &CFG.retain.events},
      {"RETAIN_IDEMPOTENCY", 24LL * 3600 * 1000, &CFG.retain.idempotency},
      {"RETAIN_RATE_LIMITS", 3600LL * 1000, &CFG.retain.rate_limits},
      {"RETAIN_QUEUE", 7LL * 24 * 3600 * 1000, &CFG.retain.queue},
      {"RETAIN_ELEVATIONS", 90LL * 24 * 3600 * 1000, &CFG.retain.elevations},
      {"RETAIN_MAIL", 7LL * 24 * 3600 * 1000, &CFG.retain.mail},
  };
  for (size_t i = 0; i < ARRAY_LEN(retain); i++)
    if (!env_duration(retain[i].name, retain[i].fallback, 1000, retain[i].into, err)) return false;
  /* a longer sweep period than the default is allowed anywhere; a shorter one costs only queries */
  const char *sweep = getenv("RETENTION_SWEEP");
  CFG.retain.sweep = 3600LL * 1000;
  if (sweep && *sweep && (!config_duration(sweep, &CFG.retain.sweep) || CFG.retain.sweep < 1000)) {
    snprintf(err, 256, "RETENTION_SWEEP must be a duration such as 1h (at least 1s)");
    return false;
  }
  return true;
}

static bool env_int(const char *name, int fallback, int lo, int hi, int *out, char err[256]) {
  const char *v = getenv(name);
  if (!v || !*v) {
    *out = fallback;
    return true;
  }
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (errno || *end || n < lo || n > hi) {
    snprintf(err, 256, "%s must be an integer from %d to %d", name, lo, hi);
    return false;
  }
  *out = (int)n;
  return true;
}

/* Outside production a secret is generated once and kept, so tokens survive restarts. */
/* Stripe's rules for a statement descriptor's suffix: 1 to 22 printable ASCII characters, at
 * least one letter, none of < > \ ' " *. */
static bool statement_suffix_ok(const char *s, char err[256]) {
  size_t n = strlen(s);
  bool letter = false, clean = n >= 1 && n <= 22;
  for (const char *p = s; *p && clean; p++) {
    clean = *p >= 0x20 && *p < 0x7f && !strchr("<>\\'\"*", *p);
    letter = letter || isalpha((unsigned char)*p);
  }
  if (clean && letter) return true;
  snprintf(err, 256,
           "STATEMENT_DESCRIPTOR_SUFFIX must be 1 to 22 printable characters with a letter and none of < > \\ ' \" *");
  return false;
}

static bool load_generated_secret(char err[256]) {
  char path[4096];
  snprintf(path, sizeof path, "%s/jwt_secret", CFG.data_dir);
  size_t len;
  char *s = read_file(path, &len);
  if (s && len >= 32) {
    CFG.jwt_secret = s, CFG.jwt_secret_len = len;
    return true;
  }
  free(s);
  unsigned char raw[32];
  random_bytes(raw, sizeof raw);
  char hex[65];
  hex_encode(raw, sizeof raw, hex);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write(fd, hex, 64) != 64) {
    if (fd >= 0) close(fd);
    snprintf(err, 256, "cannot write %s: %s", path, ERRNO_TEXT());
    return false;
  }
  close(fd);
  CFG.jwt_secret = xstrdup(hex), CFG.jwt_secret_len = 64;
  return true;
}

/* url without its trailing slashes (a new string). */
static char *without_trailing_slash(const char *url) {
  char *s = xstrdup(url);
  for (size_t n = strlen(s); n > 0 && s[n - 1] == '/'; n--) s[n - 1] = 0;
  return s;
}

/* One APP_REDIRECT_URLS entry, normalised into out (lowercase, no trailing slash): an origin
 * "http(s)://host[:port]" (no user, path, query or fragment) or a custom scheme "myapp://". */
static bool redirect_entry(const char *entry, size_t n, char *out, size_t cap) {
  while (n > 0 && entry[n - 1] == '/' && !(n >= 3 && !strncmp(entry + n - 3, "://", 3))) n--;
  if (n == 0 || n >= cap) return false;
  for (size_t i = 0; i < n; i++) out[i] = (char)tolower((unsigned char)entry[i]);
  out[n] = 0;
  const char *sep = strstr(out, "://");
  if (!sep || sep == out || !isalpha((unsigned char)out[0])) return false;
  for (const char *p = out; p < sep; p++)
    if (!isalnum((unsigned char)*p) && !strchr("+.-", *p)) return false;
  size_t scheme = (size_t)(sep - out);
  bool web = (scheme == 4 && !strncmp(out, "http", 4)) || (scheme == 5 && !strncmp(out, "https", 5));
  const char *host = sep + 3;
  if (!web) return *host == 0; /* a custom scheme: nothing after "://" */
  if (!*host) return false;
  for (const char *p = host; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr(".-:[]", *p)) return false;
  return true;
}

/* APP_URL (unset: the server's own pages under PUBLIC_URL/app) and APP_REDIRECT_URLS. */
static bool app_links_load(char err[256]) {
  const char *app = getenv("APP_URL");
  if (!app || !*app) {
    char *base = without_trailing_slash(CFG.public_url);
    size_t n = strlen(base) + 8;
    CFG.app_url = xmalloc(n);
    snprintf(CFG.app_url, n, "%s/app", base);
    free(base);
  } else {
    CFG.app_url = without_trailing_slash(app);
  }
  const char *list = getenv("APP_REDIRECT_URLS");
  size_t cap = list ? strlen(list) + 1 : 1, at = 0;
  CFG.app_redirect_urls = xcalloc(1, cap);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    while (n > 0 && isspace((unsigned char)*p)) p++, n--;
    while (n > 0 && isspace((unsigned char)p[n - 1])) n--;
    if (n > 0) {
      char one[1024];
      if (!redirect_entry(p, n, one, sizeof one)) {
        snprintf(err, 256,
                 "APP_REDIRECT_URLS: \"%.*s\" is neither an origin (https://host[:port]) nor a custom "
                 "scheme (myapp://)",
                 (int)(n > 80 ? 80 : n), p);
        return false;
      }
      at += (size_t)snprintf(CFG.app_redirect_urls + at, cap - at, "%s%s", at ? "," : "", one);
    }
    if (!end) break;
    p = end + 1;
  }
  return true;
}

/* The text settings with a default. */
static const struct {
  const char *name, *fallback;
  char **into;
} TEXTS[] = {
    {"ADMIN_EMAIL", "admin@localhost", &CFG.admin_email},
    {"SUPPORT_EMAIL", "support@localhost", &CFG.support_email},
    {"MAIL_FROM", "no-reply@localhost", &CFG.mail_from},
    {"STRIPE_API_BASE", "https://api.stripe.com", &CFG.stripe_api_base},
    {"WEATHER_URL", "https://api.open-meteo.com", &CFG.weather_url},
};
/* The optional text settings: NULL when unset. */
static const struct {
  const char *name;
  char **into;
} OPTIONAL_TEXTS[] = {
    {"SMTP_URL", &CFG.smtp_url},
    {"BOOTSTRAP_ADMIN_EMAIL", &CFG.bootstrap_admin_email},
    {"BOOTSTRAP_ADMIN_PASSWORD", &CFG.bootstrap_admin_password},
    {"STRIPE_SECRET_KEY", &CFG.stripe_secret_key},
    {"STRIPE_WEBHOOK_SECRET", &CFG.stripe_webhook_secret},
    {"STRIPE_CONNECT_WEBHOOK_SECRET", &CFG.stripe_connect_webhook_secret},
    {"STRIPE_PREMIUM_PRICE_ID", &CFG.stripe_premium_price_id},
    {"STATEMENT_DESCRIPTOR_SUFFIX", &CFG.statement_descriptor_suffix},
    {"S3_ENDPOINT", &CFG.s3_endpoint},
    {"S3_BUCKET", &CFG.s3_bucket},
    {"S3_REGION", &CFG.s3_region},
    {"S3_ACCESS_KEY_ID", &CFG.s3_access_key_id},
    {"S3_SECRET_ACCESS_KEY", &CFG.s3_secret_access_key},
    {"GEOCODER_URL", &CFG.geocoder_url},
    {"ROUTER_URL", &CFG.router_url},
    {"PUSH_URL", &CFG.push_url},
    {"METRICS_TOKEN", &CFG.metrics_token},
};

bool config_load(char err[256]) {
  char *env = env_or("APP_ENV", "development");
  if (!strcmp(env, "development"))
    CFG.env = ENV_DEVELOPMENT;
  else if (!strcmp(env, "test"))
    CFG.env = ENV_TEST;
  else if (!strcmp(env, "production"))
    CFG.env = ENV_PRODUCTION;
  else {
    snprintf(err, 256, "APP_ENV must be development, test or production");
    free(env);
    return false;
  }
  free(env);
  if (!env_int("PORT", 8080, 0, 65535, &CFG.port, err)) return false;
  CFG.bind = env_or("BIND", "127.0.0.1");
  CFG.data_dir = env_or("DATA_DIR", "./data");
  if (!mkdir_p(CFG.data_dir)) {
    snprintf(err, 256, "cannot create DATA_DIR %s: %s", CFG.data_dir, ERRNO_TEXT());
    return false;
  }
  char buf[4200];
  snprintf(buf, sizeof buf, "sqlite:%s/marketplace.db", CFG.data_dir);
  CFG.database_url = env_or("DATABASE_URL", buf);
  if (!str_starts_with(CFG.database_url, "sqlite:") && !config_is_postgres()) {
    snprintf(err, 256, "DATABASE_URL must start with sqlite:, postgres:// or postgresql://");
    return false;
  }
  CFG.database_listen_url = env_or("DATABASE_LISTEN_URL", CFG.database_url);
  if (config_is_postgres() && !str_starts_with(CFG.database_listen_url, "postgres://") &&
      !str_starts_with(CFG.database_listen_url, "postgresql://")) {
    snprintf(err, 256, "DATABASE_LISTEN_URL must start with postgres:// or postgresql://");
    return false;
  }
  snprintf(buf, sizeof buf, "http://localhost:%d", CFG.port);
  CFG.public_url = env_or("PUBLIC_URL", buf);
  if (!app_links_load(err)) return false;
  for (size_t i = 0; i < ARRAY_LEN(TEXTS); i++) *TEXTS[i].into = env_or(TEXTS[i].name, TEXTS[i].fallback);
  for (size_t i = 0; i < ARRAY_LEN(OPTIONAL_TEXTS); i++) *OPTIONAL_TEXTS[i].into = env_or(OPTIONAL_TEXTS[i].name, NULL);
  /* a local stand-in of Stripe (STRIPE_API_BASE moved) serves the file uploads too, as stripe-mock does */
  CFG.stripe_files_base =
      env_or("STRIPE_FILES_BASE",
             strcmp(CFG.stripe_api_base, "https://api.stripe.com") ? CFG.stripe_api_base : "https://files.stripe.com");
  if (CFG.statement_descriptor_suffix && !statement_suffix_ok(CFG.statement_descriptor_suffix, err)) return false;
  if (!env_int("BCRYPT_COST", 12, 4, 31, &CFG.bcrypt_cost, err)) return false;
  if (CFG.env == ENV_PRODUCTION && CFG.bcrypt_cost < 12) {
    snprintf(err, 256, "BCRYPT_COST below 12 is refused in production");
    return false;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int default_threads = cores > 1 ? (int)cores - 1 : 1;
  if (!env_int("BCRYPT_THREADS", default_threads, 1, 256, &CFG.bcrypt_threads, err)) return false;
  if (!env_int("BCRYPT_QUEUE", 8 * CFG.bcrypt_threads, 0, 100000, &CFG.bcrypt_queue, err)) return false;
  /* a few connections per core keep the cores busy; more only add contention */
  int default_pool = cores > 2 ? 4 * (int)cores : 8;
  if (!env_int("DB_POOL_SIZE", default_pool, 1, 1024, &CFG.db_pool_size, err)) return false;
  if (!env_int("DB_BUSY_TIMEOUT_MS", 5000, 0, 600000, &CFG.db_busy_timeout_ms, err)) return false;
  if (!env_int("PG_PREPARED_STATEMENTS", 1, 0, 1, &CFG.pg_prepared_statements, err)) return false;
  if (!env_int("HTTP_THREADS", cores > 0 ? (int)cores : 2, 1, 256, &CFG.http_threads, err)) return false;
  if (!env_int("HTTP_STREAM_THREADS", 8, 1, 256, &CFG.http_stream_threads, err)) return false;
  if (!env_int("HTTP_WORKERS", CFG.db_pool_size, 1, 4096, &CFG.http_workers, err)) return false;
  if (!env_int("HTTP_SLOW_WORKERS", 32, 1, 4096, &CFG.http_slow_workers, err)) return false;
  /* With 4, the 32 workers of a burst of acceptances queued for them (on SQLite 18% fewer
   * acceptances a second, on PostgreSQL 14%, issue 37). On SQLite a connection costs a few
   * file handles and at most SQLITE_CACHE_KIB of cache, so each slow-lane worker has one, as
   * each database-lane worker has; on PostgreSQL each is a server process: 16. Past the first
   * 4 they are opened as a burst first needs them (db.c). */
  if (!env_int("DB_SLOW_POOL_SIZE", config_is_postgres() ? 16 : CFG.http_slow_workers, 1, 4096,
               &CFG.db_slow_pool_size, err))
    return false;
  if (!env_int("QUEUE_WORKERS", 2, 1, 64, &CFG.queue_workers, err)) return false;
  if (!env_int("QUEUE_LEASE_MS", 20000, 1000, 3600000, &CFG.queue_lease_ms, err)) return false;
  if (!env_int("RECOGNITION_WORKERS", 1, 1, 16, &CFG.recognition_workers, err)) return false;
  if (!env_int("RECOGNITION_TIMEOUT_MS", 5000, 1000, 600000, &CFG.recognition_timeout_ms, err)) return false;
  if (!env_int("TRUST_PROXY", 0, 0, 16, &CFG.trust_proxy, err)) return false;
  int grace;
  if (!env_int("SHUTDOWN_GRACE", 10, 0, 600, &grace, err)) return false;
  CFG.shutdown_grace_ms = grace * 1000;
  if (!env_int("HTTP_IDLE_TIMEOUT", 75, 1, 3600, &CFG.http_idle_timeout, err)) return false;
  if (!env_int("HTTP_HEADER_TIMEOUT", 10, 1, 600, &CFG.http_header_timeout, err)) return false;
  if (!env_int("HTTP_BODY_MIN_RATE", 1024, 0, 1 << 30, &CFG.http_body_min_rate, err)) return false;
  if (!env_int("HTTP_MAX_HEADER_BYTES", 8192, 1024, 12 * 1024, &CFG.http_max_header_bytes, err)) return false;
  /* behind proxies every connection comes from a proxy: no cap unless the operator sets one */
  if (!env_int("HTTP_MAX_CONNECTIONS_PER_IP", CFG.trust_proxy > 0 ? 0 : 64, 0, 100000, &CFG.http_max_connections_per_ip,
               err))
    return false;
  if (!env_int("HTTP_MAX_CONNECTIONS", 16384, 16, 1000000, &CFG.http_max_connections, err)) return false;
  CFG.cors_origins = env_or("CORS_ORIGINS", CFG.env == ENV_PRODUCTION ? "" : "*");
  /* the live updates' session cookie (POST /events/session): a page on another site (an origin
   * CORS_ORIGINS lists) needs None, which browsers take only with Secure; development serves
   * plain http to phones and emulators on a LAN address, where Secure cookies are refused, and
   * its app usually runs on the same site (another port of the same host): Lax */
  CFG.events_cookie_samesite = env_or("EVENTS_COOKIE_SAMESITE", CFG.env == ENV_DEVELOPMENT ? "Lax" : "None");
  if (strcmp(CFG.events_cookie_samesite, "Strict") && strcmp(CFG.events_cookie_samesite, "Lax") &&
      strcmp(CFG.events_cookie_samesite, "None")) {
    snprintf(err, 256, "EVENTS_COOKIE_SAMESITE must be Strict, Lax or None");
    return false;
  }

  CFG.audit_key = env_or("AUDIT_KEY", NULL);
  if (CFG.audit_key && strlen(CFG.audit_key) < 32) {
    snprintf(err, 256, "AUDIT_KEY must be at least 32 bytes");
    return false;
  }
  snprintf(buf, sizeof buf, "%s/audit-checkpoints", CFG.data_dir);
  CFG.audit_checkpoint_file = env_or("AUDIT_CHECKPOINT_FILE", buf);
  if (!load_backup_and_retention(err)) return false;

  const char *secret = getenv("JWT_SECRET");
  if (secret && *secret) {
    if (CFG.env == ENV_PRODUCTION && strlen(secret) < 32) {
      snprintf(err, 256, "JWT_SECRET must be at least 32 bytes in production");
      return false;
    }
    CFG.jwt_secret = xstrdup(secret), CFG.jwt_secret_len = strlen(secret);
  } else if (CFG.env == ENV_PRODUCTION) {
    snprintf(err, 256, "JWT_SECRET is required in production (at least 32 bytes)");
    return false;
  } else if (!load_generated_secret(err)) {
    return false;
  }
  return true;
}

const char *config_env_name(void) {
  return CFG.env == ENV_TEST ? "test" : CFG.env == ENV_PRODUCTION ? "production" : "development";
}

bool config_is_postgres(void) {
  return str_starts_with(CFG.database_url, "postgres://") || str_starts_with(CFG.database_url, "postgresql://");
}
