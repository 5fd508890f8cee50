/* Unit tests for the simulated processor's idempotency keys (src/ext/paysim.c) on a temporary
 * SQLite database: twins sent at once under one key make one intent and all answer with it,
 * the key used again with other parameters is refused as Stripe refuses it, and a request
 * refused before it made anything leaves its key free. The API tests cover the processor
 * through the real binary, where the service's own claim on a payment keeps twins apart. */
#include "db/db.h"
#include "db/migrate.h"
#include "ext/payments.h"
#include "unit.h"
#include "unit_db.h"
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TWINS 6

static char customer[PAY_ID_LEN], method[PAY_ID_LEN];
static const pay_charge_info info = {"Lawncare job j1", "j1", "q1", "job"};

static int setup(void **state) {
  (void)state;
  unit_db_open("paysim", TWINS + 2);
  assert_true(db_migrate());
  payments_init(); /* no STRIPE_SECRET_KEY: the simulated processor */
  pay_error pe = {0};
  pay_card card;
  assert_int_equal(payments_create_customer("twins@example.com", "Twins", "customer-twins", customer, &pe), PAY_OK);
  assert_int_equal(payments_attach_method(customer, "pm_card_visa", &card, &pe), PAY_OK);
  snprintf(method, sizeof method, "%s", card.id);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  unit_db_close();
  return 0;
}

static int64_t intents_under(const char *key) {
  char like[PAY_ID_LEN + 32];
  snprintf(like, sizeof like, "%%\"idempotency_key\":\"%s\"%%", key);
  return unit_db_count("SELECT COUNT(*) FROM processor_sim_objects WHERE kind = 'payment_intent' AND data LIKE $1",
                       like);
}

static int64_t key_rows(const char *key) {
  char id[PAY_ID_LEN + 8];
  snprintf(id, sizeof id, "idem:%s", key);
  return unit_db_count("SELECT COUNT(*) FROM processor_sim_objects WHERE id = $1", id);
}

typedef struct twin {
  pthread_barrier_t *start;
  pay_rc rc;
  pay_intent pi;
} twin;

static void *authorize_twin(void *arg) {
  twin *t = arg;
  pay_error pe = {0};
  pthread_barrier_wait(t->start);
  t->rc = payments_authorize(customer, method, 5000, &info, "authorize-twins", &t->pi, &pe);
  return NULL;
}

/* The twins look at the key while a transaction holds the writer, so that every one finds it
 * free and makes an intent before any stores one: all but the first find the key taken when
 * they store, the first one's commit still to come in the group they share. */
static void test_twins_at_once_make_one_intent(void **state) {
  (void)state;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, TWINS + 1);
  pthread_t th[TWINS];
  twin t[TWINS];
  for (int i = 0; i < TWINS; i++) {
    t[i] = (twin){.start = &start};
    pthread_create(&th[i], NULL, authorize_twin, &t[i]);
  }
  db_conn *c;
  assert_int_equal(db_begin(&c), ERR_OK);
  assert_int_equal(db_exec(c, NULL, NULL, "UPDATE processor_sim_objects SET updated_at = updated_at WHERE id = $1",
                           DB_ARGS(DB_TEXT(customer))),
                   DB_OK);
  pthread_barrier_wait(&start);
  usleep(300 * 1000); /* the twins look, make their intents and queue for the writer */
  assert_int_equal(db_end(c, ERR_OK), ERR_OK);
  for (int i = 0; i < TWINS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < TWINS; i++) {
    assert_int_equal(t[i].rc, PAY_OK);
    assert_string_equal(t[i].pi.status, "requires_capture");
    assert_string_equal(t[i].pi.id, t[0].pi.id); /* the winner's, whoever stored first */
  }
  assert_int_equal(intents_under("authorize-twins"), 1);
  assert_int_equal(key_rows("authorize-twins"), 1);
  /* later, the same request again: the same intent, nothing new */
  pay_intent again;
  pay_error pe = {0};
  assert_int_equal(payments_authorize(customer, method, 5000, &info, "authorize-twins", &again, &pe), PAY_OK);
  assert_string_equal(again.id, t[0].pi.id);
  assert_int_equal(intents_under("authorize-twins"), 1);
}

static void test_a_key_used_with_other_parameters_is_refused(void **state) {
  (void)state;
  pay_intent pi;
  pay_error pe = {0};
  assert_int_equal(payments_authorize(customer, method, 7000, &info, "authorize-other", &pi, &pe), PAY_OK);
  pay_error refused = {0};
  assert_int_equal(payments_authorize(customer, method, 7100, &info, "authorize-other", &pi, &refused),
                   PAY_IDEMPOTENCY);
  assert_string_equal(refused.code, "idempotency_key_in_use");
  assert_int_equal(intents_under("authorize-other"), 1);
}

static void test_a_refused_request_leaves_its_key_free(void **state) {
  (void)state;
  pay_intent pi;
  pay_error small = {0};
  assert_int_equal(payments_authorize(customer, method, 49, &info, "authorize-small", &pi, &small), PAY_INVALID);
  assert_string_equal(small.message, "Amount must be at least $0.50 usd");
  assert_int_equal(key_rows("authorize-small"), 0);
  assert_int_equal(intents_under("authorize-small"), 0);
  pay_error pe = {0}; /* Stripe kept no result: the key takes a request with other parameters */
  assert_int_equal(payments_authorize(customer, method, 5000, &info, "authorize-small", &pi, &pe), PAY_OK);
  assert_int_equal(intents_under("authorize-small"), 1);
}

UNIT_MAIN(setup, teardown, cmocka_unit_test(test_twins_at_once_make_one_intent),
          cmocka_unit_test(test_a_key_used_with_other_parameters_is_refused),
          cmocka_unit_test(test_a_refused_request_leaves_its_key_free))
