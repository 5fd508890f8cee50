/* Unit tests for src/http/stream.c: a stream between an owner that writes and a fake transport
 * that records suspend, resume and cut. What is written before the transport attaches waits;
 * the reader takes bytes in order, parks the connection when nothing is buffered, and the next
 * write wakes it once; an end is read after the bytes before it; a backlog past the cap cuts
 * the stream; the owner hears of its end once, and a stop asks every owner for last words. */
/* cmocka.h needs these four headers first. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "core/log.h"
#include "http/stream.h"
#include <string.h>

/* ---- a fake transport and owner ---- */

static int suspends, resumes, cuts, closes, stops;
static int cut_fd;

static void t_suspend(void *conn) {
  (void)conn;
  suspends++;
}
static void t_resume(void *conn) {
  (void)conn;
  resumes++;
}
static void t_cut(void *conn, int fd) {
  (void)conn;
  cuts++, cut_fd = fd;
}
static const hs_stream_transport fake = {t_suspend, t_resume, t_cut};

static void o_closed(void *arg, hs_stream *s) {
  (void)arg;
  closes++;
  hs_stream_release(s);
}
/* The owner's last words at a stop: written, then the end. */
static void o_stopping(void *arg, hs_stream *s) {
  (void)arg;
  stops++;
  hs_stream_write(s, "bye", 3);
  hs_stream_end(s);
}
static const hs_stream_owner owner = {o_closed, o_stopping};

static hs_req req;

static hs_stream *open_one(size_t cap) {
  memset(&req, 0, sizeof req);
  return hs_stream_open(&req, "text/event-stream", cap, &owner, NULL);
}

static int setup(void **state) {
  (void)state;
  suspends = resumes = cuts = closes = stops = 0;
  cut_fd = -1;
  return 0;
}

/* ---- the tests ---- */

static void test_open_sets_the_answer(void **state) {
  (void)state;
  hs_stream *s = open_one(100);
  assert_ptr_equal(req.stream, s);
  assert_int_equal(req.status, 200);
  assert_string_equal(req.res_content_type, "text/event-stream");
  assert_string_equal(req.res_cache_control, "no-cache");
  assert_int_equal(hs_streams_open(), 1);
  hs_stream_gone(s);
  assert_int_equal(closes, 1);
  assert_int_equal(hs_streams_open(), 0);
}

static void test_read_park_and_wake(void **state) {
  (void)state;
  hs_stream *s = open_one(100);
  assert_true(hs_stream_write(s, "early ", 6)); /* before the transport: kept, nobody woken */
  assert_int_equal(resumes, 0);
  hs_stream_attach(s, &fake, &req, 7);
  char buf[64];
  assert_int_equal(hs_stream_read(s, buf, 4), 4);
  assert_memory_equal(buf, "earl", 4);
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), 2);
  assert_memory_equal(buf, "y ", 2);
  assert_int_equal(hs_stream_backlog(s), 0);
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), 0); /* nothing: parked */
  assert_int_equal(suspends, 1);
  assert_true(hs_stream_write(s, "a", 1)); /* wakes it, once */
  assert_true(hs_stream_write(s, "b", 1));
  assert_int_equal(resumes, 1);
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), 2);
  assert_memory_equal(buf, "ab", 2);
  hs_stream_end(s); /* not parked now: nothing to wake */
  assert_int_equal(resumes, 1);
  assert_false(hs_stream_write(s, "late", 4)); /* ended: no more */
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), -1);
  hs_stream_gone(s);
  assert_int_equal(closes, 1);
  hs_stream_gone(s); /* the owner is told once */
  assert_int_equal(closes, 1);
}

static void test_end_after_what_was_written(void **state) {
  (void)state;
  hs_stream *s = open_one(100);
  hs_stream_attach(s, &fake, &req, 7);
  char buf[64];
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), 0);
  hs_stream_write(s, "last", 4);
  hs_stream_end(s);
  assert_int_equal(resumes, 1);
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), 4);
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), -1);
  hs_stream_gone(s);
}

static void test_backlog_past_the_cap_cuts(void **state) {
  (void)state;
  hs_stream *s = open_one(10);
  hs_stream_attach(s, &fake, &req, 42);
  char buf[64];
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), 0); /* parked */
  assert_true(hs_stream_write(s, "123456", 6));
  assert_int_equal(hs_stream_read(s, buf, 2), 2); /* taken: 4 left */
  assert_true(hs_stream_write(s, "789012", 6));   /* 10: at the cap */
  assert_false(hs_stream_write(s, "x", 1));       /* past it: cut */
  assert_int_equal(cuts, 1);
  assert_int_equal(cut_fd, 42);
  assert_int_equal(hs_stream_backlog(s), 0); /* what waited is dropped */
  assert_int_equal(hs_stream_read(s, buf, sizeof buf), -2);
  assert_false(hs_stream_write(s, "y", 1));
  hs_stream_gone(s);
  assert_int_equal(closes, 1);
}

static void test_stop_asks_for_last_words_then_cuts(void **state) {
  (void)state;
  hs_stream *a = open_one(100), *b = open_one(100);
  hs_stream_attach(a, &fake, &req, 1);
  hs_stream_attach(b, &fake, &req, 2);
  char buf[64];
  assert_int_equal(hs_stream_read(a, buf, sizeof buf), 0);
  /* nothing takes b's words: the stop waits, then cuts what is left (a and b both, as no
   * transport here finishes either) */
  assert_int_equal(hs_streams_stop(50), 2);
  assert_int_equal(stops, 2);
  assert_int_equal(cuts, 2);
  assert_int_equal(hs_stream_read(a, buf, sizeof buf), -2);
  hs_stream_gone(a);
  hs_stream_gone(b);
  assert_int_equal(closes, 2);
  assert_int_equal(hs_streams_open(), 0);
  /* a stream whose transport finishes in time is not cut */
  hs_stream *c = open_one(100);
  hs_stream_attach(c, &fake, &req, 3);
  hs_stream_gone(c); /* gone before the stop */
  assert_int_equal(hs_streams_stop(50), 0);
}

int main(void) {
  log_set_level(LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_open_sets_the_answer, setup),
      cmocka_unit_test_setup(test_read_park_and_wake, setup),
      cmocka_unit_test_setup(test_end_after_what_was_written, setup),
      cmocka_unit_test_setup(test_backlog_past_the_cap_cuts, setup),
      cmocka_unit_test_setup(test_stop_asks_for_last_words_then_cuts, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
