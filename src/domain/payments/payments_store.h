/* SQL of the payments domain: billing fields of users, payments rows, webhook events. */
#ifndef DOMAIN_PAYMENTS_STORE_H
#define DOMAIN_PAYMENTS_STORE_H
#include "core/errors.h"
#include "db/db.h"
#include <jansson.h>
#include <stdbool.h>

typedef struct billing {
  const char *id, *email, *name;
  const char *customer_id, *payment_method_id, *subscription_id, *subscribe_key;
  bool is_premium, cancel_at_period_end;
  const char *premium_since; /* epoch ms text or NULL */
} billing;

typedef struct payment_row {
  const char *id, *job_id, *user_id, *kind, *status, *intent_id;
  int64_t amount_cents;
} payment_row;

err_t pay_store_billing(arena *a, const char *user_id, billing *out);
/* Stores customer_id unless the user has one; *winner gets the id in force afterwards. */
err_t pay_store_set_customer(arena *a, const char *user_id, const char *customer_id, const char **winner);
err_t pay_store_set_method(const char *user_id, const char *payment_method_id);
/* Clears the saved method when it is still `payment_method_id`. */
err_t pay_store_clear_method(const char *user_id, const char *payment_method_id);
/* Sets the subscribe key unless one is set; *winner gets the key in force. */
err_t pay_store_claim_subscribe_key(arena *a, const char *user_id, const char *key, const char **winner);
err_t pay_store_clear_subscribe_key(const char *user_id);
err_t pay_store_set_premium(const char *user_id, const char *subscription_id, bool active, bool cancel_at_period_end);
err_t pay_store_set_cancel_flag(const char *user_id, bool cancel_at_period_end);

/* payments rows */
err_t pay_store_insert(const char *id, const char *job_id, const char *user_id, const char *kind, const char *status,
                       int64_t cents, const char *intent_id, const char *failure_reason);
err_t pay_store_find(arena *a, const char *job_id, const char *kind, payment_row *out, bool *found);
/* Moves payment id from `from` to `to` (conditional); *moved tells whether it did. */
err_t pay_store_move(const char *id, const char *from, const char *to, const char *intent_id, bool *moved);
err_t pay_store_delete(const char *id);
/* The status of job job_id, or NULL when there is no such job. */
err_t pay_store_job_status(arena *a, const char *job_id, const char **status);
/* The job's status, customer and accepted quote's total (0 without one); *status NULL when the
 * job does not exist. */
err_t pay_store_job_terms(arena *a, const char *job_id, const char **status, const char **customer, int64_t *cents);

/* True when some user holds subscription_id as their current subscription. */
err_t pay_store_holds_subscription(const char *subscription_id, bool *holds);
/* Applies a verified processor event once: records its id and runs the change in one
 * transaction. *duplicate is true when the id was seen before (nothing changes then). */
err_t pay_store_apply_event(const char *event_id, const char *type, json_t *object, bool *duplicate);

#endif
