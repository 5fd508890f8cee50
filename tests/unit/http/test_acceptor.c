/* Unit tests for src/http/acceptor.c over real sockets: a connection whose first bytes are a
 * GET /events is handed over as a stream, in one packet or in pieces; anything else, a silent
 * connection past the wait, and one that closes at once are handed over as ordinary; the bytes
 * stay unread for the transport; port 0 binds a free port, on IPv4 and on IPv6 (only IPv6:
 * an IPv4 client is refused); a bad address is refused; the stop refuses new connections and
 * closes the ones still waiting. The hand-over records what it got; the test waits for it. */
/* cmocka.h needs these four headers first. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "core/log.h"
#include "http/acceptor.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- what the acceptor handed over ---- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int handed, handed_fd, handed_family;
static bool handed_stream;

static void hand(int fd, const struct sockaddr *addr, socklen_t len, bool stream) {
  (void)len;
  pthread_mutex_lock(&mu);
  handed++, handed_fd = fd, handed_stream = stream, handed_family = addr->sa_family;
  pthread_mutex_unlock(&mu);
}

static void pause_ms(int ms) {
  nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}, NULL);
}

/* Waits up to 3 s for the n-th hand-over; its fd, or -1. */
static int wait_handed(int n) {
  for (int i = 0; i < 300; i++) {
    pthread_mutex_lock(&mu);
    int got = handed, fd = handed_fd;
    pthread_mutex_unlock(&mu);
    if (got >= n) return fd;
    pause_ms(10);
  }
  return -1;
}

static int connect_to(int family, int port) {
  struct sockaddr_storage ss = {0};
  socklen_t len;
  if (family == AF_INET6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6, a->sin6_port = htons((uint16_t)port), a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET, a->sin_port = htons((uint16_t)port), a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  }
  int fd = socket(family, SOCK_STREAM, 0);
  if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void send_str(int fd, const char *s) { assert_int_equal(send(fd, s, strlen(s), 0), (ssize_t)strlen(s)); }

static int setup(void **state) {
  (void)state;
  handed = 0, handed_fd = -1, handed_stream = false, handed_family = 0;
  char err[256];
  assert_true(hs_acceptor_start("127.0.0.1", 0, 16, 300, hand, err));
  assert_true(hs_acceptor_port() > 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  hs_acceptor_stop();
  return 0;
}

/* Sends text on c, waits for the connection to be handed over, as a stream or not; its fd. */
static int handed_after(int c, const char *text, bool stream) {
  send_str(c, text);
  int fd = wait_handed(1);
  assert_true(fd >= 0);
  assert_int_equal(handed_stream, stream);
  return fd;
}

/* ---- tests ---- */

static void test_classify(void **state) {
  (void)state;
  assert_int_equal(hs_acceptor_classify("GET /events HTTP/1.1", 20), 1);
  assert_int_equal(hs_acceptor_classify("GET /events?ticket=x", 20), 1);
  assert_int_equal(hs_acceptor_classify("GET /events/", 12), 1);
  assert_int_equal(hs_acceptor_classify("GET /eventsx", 12), 0);
  assert_int_equal(hs_acceptor_classify("GET /events", 11), -1); /* what follows decides */
  assert_int_equal(hs_acceptor_classify("GET /ev", 7), -1);
  assert_int_equal(hs_acceptor_classify("G", 1), -1);
  assert_int_equal(hs_acceptor_classify("POST /events/ticket", 19), 0);
  assert_int_equal(hs_acceptor_classify("GET /users/me", 13), 0);
  assert_int_equal(hs_acceptor_classify("get /events ", 12), 0); /* methods are case-sensitive */
}

static void test_stream_request_is_handed_as_a_stream_with_its_bytes_unread(void **state) {
  (void)state;
  int c = connect_to(AF_INET, hs_acceptor_port());
  assert_true(c >= 0);
  int fd = handed_after(c, "GET /events HTTP/1.1\r\n\r\n", true);
  assert_int_equal(handed_family, AF_INET);
  char buf[64] = {0};
  assert_int_equal(recv(fd, buf, sizeof buf - 1, 0), 24); /* the transport reads the request whole */
  assert_string_equal(buf, "GET /events HTTP/1.1\r\n\r\n");
  close(fd), close(c);
}

static void test_stream_request_in_pieces(void **state) {
  (void)state;
  int c = connect_to(AF_INET, hs_acceptor_port());
  send_str(c, "GET /ev");
  pause_ms(50);
  assert_int_equal(handed, 0); /* a prefix: it waits for more */
  int fd = handed_after(c, "ents?ticket=t HTTP/1.1\r\n", true);
  close(fd), close(c);
}

static void test_other_requests_are_ordinary(void **state) {
  (void)state;
  int c = connect_to(AF_INET, hs_acceptor_port());
  int fd = handed_after(c, "GET /users/me HTTP/1.1\r\n\r\n", false);
  close(fd), close(c);
}

static void test_silent_and_stalled_connections_are_ordinary_after_the_wait(void **state) {
  (void)state;
  int silent = connect_to(AF_INET, hs_acceptor_port());
  int stalled = connect_to(AF_INET, hs_acceptor_port());
  send_str(stalled, "GET /eve");
  pause_ms(100);
  assert_int_equal(handed, 0);
  assert_true(wait_handed(2) >= 0); /* the wait is 300 ms */
  assert_false(handed_stream);
  close(silent), close(stalled);
}

static void test_closed_connection_is_handed_over_to_be_closed(void **state) {
  (void)state;
  int c = connect_to(AF_INET, hs_acceptor_port());
  close(c);
  int fd = wait_handed(1);
  assert_true(fd >= 0);
  assert_false(handed_stream);
  close(fd);
}

static void test_stop_refuses_new_connections_and_closes_waiting_ones(void **state) {
  (void)state;
  int port = hs_acceptor_port();
  int waiting = connect_to(AF_INET, port);
  pause_ms(50);
  hs_acceptor_stop();
  assert_int_equal(handed, 0);
  char b;
  /* closed by the stop: at its end (0), or reset when the acceptor had not taken it from the
   * listening socket's queue yet (a loaded machine) */
  ssize_t got = recv(waiting, &b, 1, 0);
  assert_true(got == 0 || (got < 0 && errno == ECONNRESET));
  close(waiting);
  assert_int_equal(connect_to(AF_INET, port), -1);
  char err[256];
  assert_true(hs_acceptor_start("127.0.0.1", 0, 16, 300, hand, err)); /* and starts again */
}

static void test_ipv6_only(void **state) {
  (void)state;
  hs_acceptor_stop();
  char err[256];
  int probe = socket(AF_INET6, SOCK_STREAM, 0);
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = in6addr_loopback};
  bool has_v6 = probe >= 0 && bind(probe, (struct sockaddr *)&a, sizeof a) == 0;
  if (probe >= 0) close(probe);
  if (!has_v6) { /* no IPv6 loopback here: nothing to test */
    assert_true(hs_acceptor_start("127.0.0.1", 0, 16, 300, hand, err));
    return;
  }
  assert_true(hs_acceptor_start("::", 0, 16, 300, hand, err));
  int port = hs_acceptor_port();
  assert_true(port > 0);
  assert_int_equal(connect_to(AF_INET, port), -1); /* "::" is IPv6 only, as libmicrohttpd bound it */
  int c = connect_to(AF_INET6, port);
  assert_true(c >= 0);
  send_str(c, "GET /events HTTP/1.1\r\n\r\n");
  int fd = wait_handed(1);
  assert_true(fd >= 0);
  assert_true(handed_stream);
  assert_int_equal(handed_family, AF_INET6);
  close(fd), close(c);
}

static void test_bad_address_and_port_in_use(void **state) {
  (void)state;
  char err[256];
  int port = hs_acceptor_port();
  hs_acceptor_stop();
  assert_false(hs_acceptor_start("not-an-address", 0, 16, 300, hand, err));
  assert_string_equal(err, "BIND not-an-address is not an address");
  int other = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {
      .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(other, (struct sockaddr *)&a, sizeof a), 0);
  assert_int_equal(listen(other, 1), 0);
  assert_false(hs_acceptor_start("127.0.0.1", port, 16, 300, hand, err));
  assert_non_null(strstr(err, "cannot listen on 127.0.0.1:"));
  close(other);
  assert_true(hs_acceptor_start("127.0.0.1", 0, 16, 300, hand, err));
}

int main(void) {
  log_set_level(LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_classify),
      cmocka_unit_test_setup_teardown(test_stream_request_is_handed_as_a_stream_with_its_bytes_unread, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_request_in_pieces, setup, teardown),
      cmocka_unit_test_setup_teardown(test_other_requests_are_ordinary, setup, teardown),
      cmocka_unit_test_setup_teardown(test_silent_and_stalled_connections_are_ordinary_after_the_wait, setup, teardown),
      cmocka_unit_test_setup_teardown(test_closed_connection_is_handed_over_to_be_closed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stop_refuses_new_connections_and_closes_waiting_ones, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ipv6_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_address_and_port_in_use, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
