/* Unit tests for src/ext/fetch.c (the one raw exchange) and its use by src/ext/stripe.c,
 * against a small HTTP server on a thread of this process: method, header lines and body
 * arrive as given; the answer is kept up to the cap exactly and refused one byte past it; a
 * scheme other than http(s) is refused without a byte read; the deadline holds; the JSON
 * helpers report a refused or non-JSON answer as a bad body; and Stripe's calls go through
 * the exchange: an answer over its cap is tried once, not three times, a 503 three times, and
 * a STRIPE_API_BASE of another scheme is refused. */
#include "core/config.h"
#include "core/log.h"
#include "ext/fetch.h"
#include "ext/payments_impl.h"
#include "unit.h"
#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- a one-connection-at-a-time HTTP server ---- */

static struct {
  int fd, port;
  pthread_t thread;
  _Atomic int requests;
  /* the answer: status, body_len bytes of `fill` (or body when set), after delay_ms */
  int status;
  size_t body_len;
  const char *body;
  int delay_ms;
  /* the last request as received (head and body) */
  char last[16384];
} srv;

static void answer(int c) {
  char head[256];
  size_t n = srv.body ? strlen(srv.body) : srv.body_len;
  int hn =
      snprintf(head, sizeof head, "HTTP/1.1 %d X\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", srv.status, n);
  send(c, head, (size_t)hn, MSG_NOSIGNAL);
  char chunk[65536];
  memset(chunk, 'x', sizeof chunk);
  for (size_t sent = 0; sent < n;) {
    const char *p = srv.body ? srv.body + sent : chunk;
    size_t piece = n - sent < sizeof chunk ? n - sent : sizeof chunk;
    ssize_t w = send(c, p, piece, MSG_NOSIGNAL);
    if (w <= 0) break; /* the client gave up (a refused answer) */
    sent += (size_t)w;
  }
}

static void *serve(void *arg) {
  (void)arg;
  for (;;) {
    int c = accept(srv.fd, NULL, NULL);
    if (c < 0) return NULL;
    size_t got = 0;
    char *end = NULL;
    while (got < sizeof srv.last - 1 && !end) {
      ssize_t r = recv(c, srv.last + got, sizeof srv.last - 1 - got, 0);
      if (r <= 0) break;
      got += (size_t)r, srv.last[got] = 0;
      end = strstr(srv.last, "\r\n\r\n");
    }
    const char *cl = strcasestr(srv.last, "Content-Length:");
    size_t want = end ? (size_t)(end + 4 - srv.last) + (cl ? strtoul(cl + 15, NULL, 10) : 0) : 0;
    while (got < want && got < sizeof srv.last - 1) {
      ssize_t r = recv(c, srv.last + got, sizeof srv.last - 1 - got, 0);
      if (r <= 0) break;
      got += (size_t)r, srv.last[got] = 0;
    }
    atomic_fetch_add(&srv.requests, 1);
    if (srv.delay_ms) usleep((useconds_t)srv.delay_ms * 1000);
    answer(c);
    close(c);
  }
}

static int group_setup(void **state) {
  (void)state;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  log_set_level((log_level)(LOG_ERROR + 1)); /* the adapters' warnings are expected here */
  srv.fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  if (bind(srv.fd, (struct sockaddr *)&a, sizeof a) || listen(srv.fd, 16) ||
      getsockname(srv.fd, (struct sockaddr *)&a, &len))
    fail_msg("cannot listen");
  srv.port = ntohs(a.sin_port);
  pthread_create(&srv.thread, NULL, serve, NULL);
  return 0;
}

static int group_teardown(void **state) {
  (void)state;
  shutdown(srv.fd, SHUT_RDWR);
  close(srv.fd);
  pthread_join(srv.thread, NULL);
  curl_global_cleanup();
  return 0;
}

/* Each test sets the answer it wants; requests are counted from here. */
static void will_answer(int status, const char *body, size_t body_len, int delay_ms) {
  srv.status = status, srv.body = body, srv.body_len = body_len, srv.delay_ms = delay_ms;
  atomic_store(&srv.requests, 0);
  srv.last[0] = 0;
}

static char *url(const char *path) {
  static char u[128];
  snprintf(u, sizeof u, "http://127.0.0.1:%d%s", srv.port, path);
  return u;
}

/* GET path on the test server within timeout_ms: fetch_exchange's outcome, its answer in *res. */
static fetch_rc get_within(const char *path, int timeout_ms, fetch_res *res) {
  fetch_req rq = {.method = "GET", .url = url(path), .timeout_ms = timeout_ms};
  return fetch_exchange(&rq, res);
}

/* ---- the exchange ---- */

static void test_exchange_sends_what_is_described(void **state) {
  (void)state;
  will_answer(201, "{\"ok\":true}", 0, 0);
  const char *headers[] = {"X-One: 1", "Content-Type: text/plain", NULL};
  fetch_req rq = {
      .method = "PUT", .url = url("/thing?x=1"), .headers = headers, .body = "a\0b", .body_len = 3, .timeout_ms = 5000};
  fetch_res res;
  assert_int_equal(fetch_exchange(&rq, &res), FETCH_OK);
  assert_int_equal(res.status, 201);
  assert_string_equal(res.body, "{\"ok\":true}");
  assert_int_equal(res.len, 11);
  assert_null(res.error);
  fetch_res_fini(&res);
  assert_int_equal(atomic_load(&srv.requests), 1);
  assert_true(!strncmp(srv.last, "PUT /thing?x=1 HTTP/1.1\r\n", 25));
  assert_non_null(strstr(srv.last, "\r\nX-One: 1\r\n"));
  assert_non_null(strstr(srv.last, "\r\nUser-Agent: marketplace/"));
  assert_non_null(strstr(srv.last, "\r\nContent-Length: 3\r\n"));
  assert_memory_equal(strstr(srv.last, "\r\n\r\n") + 4, "a\0b", 3);
}

static void test_exchange_keeps_an_error_answer(void **state) {
  (void)state;
  will_answer(404, "missing", 0, 0);
  fetch_res res;
  assert_int_equal(get_within("/", 5000, &res), FETCH_BAD_STATUS);
  assert_int_equal(res.status, 404);
  assert_string_equal(res.body, "missing");
  fetch_res_fini(&res);
}

static void test_answer_cap(void **state) {
  (void)state;
  fetch_req rq = {.method = "GET", .url = url("/"), .max_answer = 100000, .timeout_ms = 5000};
  fetch_res res;
  will_answer(200, NULL, 100000, 0); /* exactly the cap */
  assert_int_equal(fetch_exchange(&rq, &res), FETCH_OK);
  assert_int_equal(res.len, 100000);
  fetch_res_fini(&res);
  will_answer(200, NULL, 100001, 0); /* one byte over */
  assert_int_equal(fetch_exchange(&rq, &res), FETCH_TOO_LARGE);
  assert_null(res.body);
  assert_string_equal(res.error, "answer too large");
  fetch_res_fini(&res);
}

static void test_only_http_and_https(void **state) {
  (void)state;
  will_answer(200, "{}", 0, 0);
  char other[128];
  snprintf(other, sizeof other, "ftp://127.0.0.1:%d/", srv.port);
  const char *refused[] = {"file:///etc/hostname", other, "gopher://127.0.0.1/", "dict://127.0.0.1/"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    fetch_req rq = {.method = "GET", .url = refused[i], .timeout_ms = 2000};
    fetch_res res;
    assert_int_equal(fetch_exchange(&rq, &res), FETCH_UNREACHABLE);
    assert_null(res.body);
    assert_non_null(res.error);
    fetch_res_fini(&res);
  }
  assert_int_equal(atomic_load(&srv.requests), 0);
}

static void test_deadline(void **state) {
  (void)state;
  will_answer(200, "{}", 0, 700);
  fetch_res res;
  assert_int_equal(get_within("/slow", 200, &res), FETCH_TIMEOUT);
  assert_null(res.body);
  fetch_res_fini(&res);
  usleep(700 * 1000); /* the server's answer to the abandoned request */
}

static void test_json_helpers(void **state) {
  (void)state;
  long status;
  json_t *out;
  will_answer(200, "{\"a\":1}", 0, 0);
  assert_int_equal(fetch_json(url("/"), 5000, &status, &out), FETCH_OK);
  assert_int_equal(json_integer_value(json_object_get(out, "a")), 1);
  json_decref(out);
  assert_non_null(strstr(srv.last, "\r\nAccept: application/json\r\n"));
  will_answer(200, "not json", 0, 0);
  assert_int_equal(fetch_json(url("/"), 5000, &status, &out), FETCH_BAD_BODY);
  assert_null(out);
  will_answer(200, NULL, 1024 * 1024 + 1, 0); /* over the helpers' 1 MiB */
  assert_int_equal(fetch_json(url("/"), 5000, &status, &out), FETCH_BAD_BODY);
  assert_null(out);
  will_answer(500, "{\"why\":\"down\"}", 0, 0);
  assert_int_equal(fetch_json(url("/"), 5000, &status, &out), FETCH_BAD_STATUS);
  assert_int_equal(status, 500);
  assert_string_equal(json_string_value(json_object_get(out, "why")), "down");
  json_decref(out);
  json_t *payload = json_pack("{s:s}", "to", "x");
  will_answer(204, "", 0, 0);
  assert_int_equal(fetch_post_json(url("/push"), payload, 5000, &status), FETCH_OK);
  json_decref(payload);
  assert_non_null(strstr(srv.last, "\r\nContent-Type: application/json\r\n"));
  assert_non_null(strstr(srv.last, "{\"to\":\"x\"}"));
}

/* ---- Stripe through the exchange ---- */

static void use_stripe(const char *base) {
  static char key[] = "sk_test_unit";
  static char b[256];
  snprintf(b, sizeof b, "%s", base);
  CFG.stripe_api_base = b;
  CFG.stripe_secret_key = key;
}

static void test_stripe_call(void **state) {
  (void)state;
  use_stripe(url(""));
  will_answer(200, "{\"id\":\"cus_1\"}", 0, 0);
  char id[PAY_ID_LEN];
  pay_error err = {0};
  assert_int_equal(stripe_ops.create_customer("a@b.c", "A B", "key-1", id, &err), PAY_OK);
  assert_string_equal(id, "cus_1");
  assert_int_equal(atomic_load(&srv.requests), 1);
  assert_true(!strncmp(srv.last, "POST /v1/customers HTTP/1.1\r\n", 29));
  assert_non_null(strstr(srv.last, "\r\nAuthorization: Bearer sk_test_unit\r\n"));
  assert_non_null(strstr(srv.last, "\r\nIdempotency-Key: key-1\r\n"));
  assert_non_null(strstr(srv.last, "\r\n\r\nemail=a%40b.c&name=A%20B"));
}

static void test_stripe_does_not_retry_a_refused_answer(void **state) {
  (void)state;
  use_stripe(url(""));
  will_answer(200, NULL, 4 * 1024 * 1024 + 1, 0);
  char id[PAY_ID_LEN];
  pay_error err = {0};
  assert_int_equal(stripe_ops.create_customer("a@b.c", "A B", "key-2", id, &err), PAY_UNAVAILABLE);
  assert_int_equal(atomic_load(&srv.requests), 1);
  assert_string_equal(err.message, "payment processor unavailable (answer too large)");
}

static void test_stripe_retries_a_server_error(void **state) {
  (void)state;
  use_stripe(url(""));
  will_answer(503, "{}", 0, 0);
  pay_intent pi;
  pay_error err = {0};
  assert_int_equal(stripe_ops.retrieve_intent("pi_1", &pi, &err), PAY_UNAVAILABLE);
  assert_int_equal(atomic_load(&srv.requests), 3);
  assert_string_equal(err.message, "payment processor unavailable (server error)");
}

static void test_stripe_only_http_and_https(void **state) {
  (void)state;
  use_stripe("file:///etc");
  pay_intent pi;
  pay_error err = {0};
  assert_int_equal(stripe_ops.retrieve_intent("pi_1", &pi, &err), PAY_UNAVAILABLE);
  assert_non_null(strstr(err.message, "payment processor unavailable ("));
  assert_null(strstr(err.message, "server error"));
}

UNIT_MAIN(group_setup, group_teardown, cmocka_unit_test(test_exchange_sends_what_is_described),
          cmocka_unit_test(test_exchange_keeps_an_error_answer), cmocka_unit_test(test_answer_cap),
          cmocka_unit_test(test_only_http_and_https), cmocka_unit_test(test_deadline),
          cmocka_unit_test(test_json_helpers), cmocka_unit_test(test_stripe_call),
          cmocka_unit_test(test_stripe_does_not_retry_a_refused_answer),
          cmocka_unit_test(test_stripe_retries_a_server_error), cmocka_unit_test(test_stripe_only_http_and_https))
