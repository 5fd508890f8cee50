/* Unit tests for the payouts domain's pure rules: what a provider keeps of its earnings once
 * part of the charge was refunded (a job's share, a tip whole), and the service's name of a
 * connected account's state. */
#include "domain/payouts/payouts.h"
#include "domain/payouts/payouts_api.h"
#include "unit.h"
#include <stdio.h>
#include <string.h>

static void test_earned_after_refunds(void **state) {
  (void)state;
  static const struct {
    int64_t earned, charged, refunded, kept;
  } cases[] = {
      {10000, 11800, 0, 10000},   /* nothing refunded */
      {10000, 11800, 1800, 8475}, /* 100 x 18 / 118 = 15.254 -> 15.25 off */
      {10000, 11800, 5900, 5000}, /* half */
      {10000, 11800, 9440, 2000}, /* 80 of the provider's 100 */
      {10000, 11800, 11800, 0},   /* all of it */
      {10000, 11800, 12000, 0},   /* more than was charged: nothing left */
      {500, 500, 200, 300},       /* a tip: what is left of it */
      {10000, 11800, 1, 9999},    /* a cent of the total: 0.85 of a cent of the share, rounded to 1 */
      {10000, 0, 100, 10000},     /* nothing charged: nothing to take */
      {10000, 11800, -5, 10000},  /* no refund */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int64_t got = payouts_earned_after_refunds(cases[i].earned, cases[i].charged, cases[i].refunded);
    if (got != cases[i].kept) fprintf(stderr, "case %zu: got %lld\n", i, (long long)got);
    assert_int_equal(got, cases[i].kept);
  }
}

static void test_account_status(void **state) {
  (void)state;
  pay_account acc;
  memset(&acc, 0, sizeof acc);
  assert_string_equal(payouts_account_status(&acc), "pending"); /* onboarding not finished */
  snprintf(acc.disabled_reason, sizeof acc.disabled_reason, "requirements.past_due");
  assert_string_equal(payouts_account_status(&acc), "pending"); /* a new account is "past due" at Stripe */
  acc.details_submitted = true;
  assert_string_equal(payouts_account_status(&acc), "restricted"); /* given, yet not taking transfers */
  acc.transfers_active = true;
  assert_string_equal(payouts_account_status(&acc), "enabled");
  memset(&acc, 0, sizeof acc);
  snprintf(acc.disabled_reason, sizeof acc.disabled_reason, "rejected.fraud");
  assert_string_equal(payouts_account_status(&acc), "restricted");
}

static void test_paid_and_unpaid(void **state) {
  (void)state;
  static const char *const unpaid[] = {"scheduled", "waiting_for_account", "on_hold", "failed"};
  static const char *const paid[] = {"paid", "reversed"};
  for (size_t i = 0; i < 4; i++) assert_true(payouts_unpaid(unpaid[i]) && !payouts_paid(unpaid[i]));
  for (size_t i = 0; i < 2; i++) assert_true(payouts_paid(paid[i]) && !payouts_unpaid(paid[i]));
  assert_false(payouts_paid("cancelled") || payouts_unpaid("cancelled") || payouts_paid(NULL) || payouts_unpaid(NULL));
}

UNIT_MAIN(NULL, NULL, cmocka_unit_test(test_earned_after_refunds), cmocka_unit_test(test_account_status),
          cmocka_unit_test(test_paid_and_unpaid))
