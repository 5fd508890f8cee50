/* Unit tests for src/ext/payments.c: reading Stripe-shaped PaymentIntents (status, amount, the
 * hold's expiry from an expanded latest_charge, the last error), refunds, and the idempotency
 * key that intents, subscriptions and refunds carry in their metadata. Both processors answer
 * in this shape. */
/* cmocka.h needs these four headers first. */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include "ext/payments_impl.h"
#include <jansson.h>
#include <string.h>

static json_t *parse(const char *text) {
  json_t *o = json_loads(text, 0, NULL);
  assert_non_null(o);
  return o;
}

static void test_authorization_with_expanded_charge(void **state) {
  (void)state;
  json_t *pi = parse("{\"id\":\"pi_1\",\"object\":\"payment_intent\",\"status\":\"requires_capture\",\"amount\":11800,"
                     "\"metadata\":{\"idempotency_key\":\"authorize-p-1\"},\"latest_charge\":{\"id\":\"ch_1\","
                     "\"payment_method_details\":{\"card\":{\"capture_before\":1700604800}}}}");
  pay_intent out;
  memset(&out, 0x5a, sizeof out);
  pay_intent_from_json(pi, &out);
  assert_string_equal(out.id, "pi_1");
  assert_string_equal(out.status, "requires_capture");
  assert_int_equal(out.amount, 11800);
  assert_int_equal(out.capture_before, 1700604800LL * 1000);
  assert_string_equal(out.error_code, "");
  assert_string_equal(out.error_message, "");
  assert_string_equal(pay_metadata_key(pi), "authorize-p-1");
  json_decref(pi);
}

static void test_charge_not_expanded_has_no_expiry(void **state) {
  (void)state;
  json_t *pi = parse("{\"id\":\"pi_2\",\"status\":\"succeeded\",\"amount\":500,\"latest_charge\":\"ch_2\"}");
  pay_intent out;
  pay_intent_from_json(pi, &out);
  assert_string_equal(out.status, "succeeded");
  assert_int_equal(out.capture_before, 0);
  assert_null(pay_metadata_key(pi));
  json_decref(pi);
}

static void test_declined_intent_keeps_its_last_error(void **state) {
  (void)state;
  json_t *pi = parse("{\"id\":\"pi_3\",\"status\":\"requires_payment_method\",\"amount\":700,\"latest_charge\":null,"
                     "\"last_payment_error\":{\"code\":\"card_declined\",\"decline_code\":\"insufficient_funds\","
                     "\"message\":\"Your card has insufficient funds.\"},\"metadata\":{}}");
  pay_intent out;
  pay_intent_from_json(pi, &out);
  assert_string_equal(out.error_code, "card_declined");
  assert_string_equal(out.error_message, "Your card has insufficient funds.");
  assert_null(pay_metadata_key(pi));
  json_decref(pi);
}

static void test_overlong_values_are_cut_not_overflowed(void **state) {
  (void)state;
  char big[2048];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = 0;
  json_t *pi =
      json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", big, "status", big, "last_payment_error", "code", big, "message", big);
  pay_intent out;
  pay_intent_from_json(pi, &out);
  assert_int_equal(strlen(out.id), sizeof out.id - 1);
  assert_int_equal(strlen(out.status), sizeof out.status - 1);
  assert_int_equal(strlen(out.error_code), sizeof out.error_code - 1);
  assert_int_equal(strlen(out.error_message), sizeof out.error_message - 1);
  json_decref(pi);
}

static void test_refund_with_and_without_a_key(void **state) {
  (void)state;
  json_t *re = parse("{\"id\":\"re_1\",\"object\":\"refund\",\"amount\":1800,\"status\":\"succeeded\","
                     "\"payment_intent\":\"pi_1\",\"metadata\":{\"idempotency_key\":\"refund-c1\"}}");
  pay_refund out;
  memset(&out, 0x5a, sizeof out);
  payments_read_refund(re, &out);
  assert_string_equal(out.id, "re_1");
  assert_string_equal(out.status, "succeeded");
  assert_int_equal(out.amount, 1800);
  assert_string_equal(out.idem_key, "refund-c1");
  json_decref(re);
  /* made in the processor's dashboard: no key; a status too long is cut, not overflowed */
  re = parse("{\"id\":\"re_2\",\"amount\":5,\"status\":\"requires_action_and_then_something_much_longer\","
             "\"metadata\":{}}");
  memset(&out, 0x5a, sizeof out);
  payments_read_refund(re, &out);
  assert_string_equal(out.idem_key, "");
  assert_int_equal(strlen(out.status), sizeof out.status - 1);
  json_decref(re);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_authorization_with_expanded_charge),
      cmocka_unit_test(test_charge_not_expanded_has_no_expiry),
      cmocka_unit_test(test_declined_intent_keeps_its_last_error),
      cmocka_unit_test(test_overlong_values_are_cut_not_overflowed),
      cmocka_unit_test(test_refund_with_and_without_a_key),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
