/* Unit tests for src/ext/payments.c: reading Stripe-shaped PaymentIntents (status, amount, the
 * hold's expiry from an expanded latest_charge, the last error), refunds, connected accounts,
 * transfers and their reversals, and the idempotency key that intents, subscriptions, refunds,
 * transfers and reversals carry in their metadata. Both processors answer in this shape. */
#include "ext/payments_impl.h"
#include "unit.h"
#include <jansson.h>
#include <stdio.h>
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

static void test_account_before_and_after_onboarding(void **state) {
  (void)state;
  json_t *acct =
      parse("{\"id\":\"acct_1\",\"object\":\"account\",\"capabilities\":{\"transfers\":\"inactive\"},"
            "\"payouts_enabled\":false,\"details_submitted\":false,\"requirements\":{\"currently_due\":"
            "[\"external_account\",\"tos_acceptance.date\"],\"disabled_reason\":\"requirements.past_due\"}}");
  pay_account out;
  memset(&out, 0x5a, sizeof out);
  payments_read_account(acct, &out);
  assert_string_equal(out.id, "acct_1");
  assert_false(out.transfers_active);
  assert_false(out.payouts_enabled);
  assert_false(out.details_submitted);
  assert_string_equal(out.disabled_reason, "requirements.past_due");
  assert_string_equal(out.requirements, "[\"external_account\",\"tos_acceptance.date\"]");
  json_decref(acct);
  acct = parse("{\"id\":\"acct_1\",\"capabilities\":{\"card_payments\":\"active\",\"transfers\":\"active\"},"
               "\"payouts_enabled\":true,\"details_submitted\":true,\"requirements\":{\"currently_due\":[],"
               "\"disabled_reason\":null}}");
  payments_read_account(acct, &out);
  assert_true(out.transfers_active);
  assert_true(out.payouts_enabled);
  assert_string_equal(out.disabled_reason, "");
  assert_string_equal(out.requirements, "[]");
  json_decref(acct);
  /* an account without requirements (an older API version's event): none due */
  acct = parse("{\"id\":\"acct_2\"}");
  payments_read_account(acct, &out);
  assert_false(out.transfers_active);
  assert_string_equal(out.requirements, "[]");
  json_decref(acct);
}

static void test_account_requirements_too_long_keep_whole_items(void **state) {
  (void)state;
  json_t *due = json_array();
  char field[64];
  for (int i = 0; i < 200; i++) {
    snprintf(field, sizeof field, "individual.verification.additional_document_%03d", i);
    json_array_append_new(due, json_string(field));
  }
  json_t *acct = json_pack("{s:s,s:{s:o}}", "id", "acct_3", "requirements", "currently_due", due);
  pay_account out;
  payments_read_account(acct, &out);
  assert_true(strlen(out.requirements) < sizeof out.requirements);
  json_t *kept = json_loads(out.requirements, 0, NULL); /* still a JSON array of whole names */
  assert_non_null(kept);
  assert_true(json_array_size(kept) > 10 && json_array_size(kept) < 200);
  assert_string_equal(json_string_value(json_array_get(kept, 0)), "individual.verification.additional_document_000");
  json_decref(kept);
  json_decref(acct);
}

static void test_transfer_and_reversal(void **state) {
  (void)state;
  json_t *tr =
      parse("{\"id\":\"tr_1\",\"object\":\"transfer\",\"amount\":6100,\"amount_reversed\":2500,"
            "\"destination\":\"acct_1\",\"metadata\":{\"idempotency_key\":\"transfer-c1-1\",\"job_id\":\"cj\"}}");
  pay_transfer t;
  memset(&t, 0x5a, sizeof t);
  pay_transfer_from_json(tr, &t);
  assert_string_equal(t.id, "tr_1");
  assert_string_equal(t.destination, "acct_1");
  assert_int_equal(t.amount, 6100);
  assert_int_equal(t.amount_reversed, 2500);
  assert_string_equal(t.idem_key, "transfer-c1-1");
  json_decref(tr);
  json_t *trr = parse("{\"id\":\"trr_1\",\"object\":\"transfer_reversal\",\"amount\":2500,\"transfer\":\"tr_1\","
                      "\"metadata\":{}}");
  pay_reversal r;
  memset(&r, 0x5a, sizeof r);
  pay_reversal_from_json(trr, &r);
  assert_string_equal(r.id, "trr_1");
  assert_int_equal(r.amount, 2500);
  assert_string_equal(r.idem_key, "");
  json_decref(trr);
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_authorization_with_expanded_charge),
          cmocka_unit_test(test_charge_not_expanded_has_no_expiry),
          cmocka_unit_test(test_declined_intent_keeps_its_last_error),
          cmocka_unit_test(test_overlong_values_are_cut_not_overflowed),
          cmocka_unit_test(test_refund_with_and_without_a_key),
          cmocka_unit_test(test_account_before_and_after_onboarding),
          cmocka_unit_test(test_account_requirements_too_long_keep_whole_items),
          cmocka_unit_test(test_transfer_and_reversal))
