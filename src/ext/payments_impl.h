/* The contract between ext/payments.c and its two implementations. Internal to src/ext. */
#ifndef EXT_PAYMENTS_IMPL_H
#define EXT_PAYMENTS_IMPL_H
#include "ext/payments.h"
#include <jansson.h>

typedef struct pay_ops {
  const char *name;
  pay_rc (*create_customer)(const char *email, const char *name, const char *idem_key, char id[PAY_ID_LEN],
                            pay_error *err);
  pay_rc (*create_setup_intent)(const char *customer, char secret[PAY_ID_LEN], pay_error *err);
  pay_rc (*attach_method)(const char *customer, const char *payment_method, pay_card *card, pay_error *err);
  pay_rc (*retrieve_method)(const char *customer, const char *payment_method, pay_card *card, pay_error *err);
  /* capture_now false: manual capture (an authorization); true: a charge */
  pay_rc (*create_intent)(const char *customer, const char *payment_method, int64_t cents, bool capture_now,
                          const pay_charge_info *info, const char *idem_key, pay_intent *out, pay_error *err);
  pay_rc (*capture)(const char *intent, const char *idem_key, pay_intent *out, pay_error *err);
  pay_rc (*cancel)(const char *intent, const char *idem_key, pay_intent *out, pay_error *err);
  pay_rc (*create_subscription)(const char *customer, const char *price, const char *payment_method,
                                const char *idem_key, pay_subscription *out, pay_error *err);
  pay_rc (*update_subscription)(const char *subscription, bool cancel_at_period_end, const char *idem_key,
                                pay_subscription *out, pay_error *err);
  pay_rc (*retrieve_subscription)(const char *subscription, pay_subscription *out, pay_error *err);
  pay_rc (*retrieve_intent)(const char *intent, pay_intent *out, pay_error *err);
  pay_rc (*find_intent)(const char *customer, const char *idem_key, pay_intent *out, pay_error *err);
  pay_rc (*find_subscription)(const char *customer, const char *idem_key, pay_subscription *out, pay_error *err);
  pay_rc (*refund)(const char *intent, int64_t cents, const char *reason, const char *idem_key, pay_refund *out,
                   pay_error *err);
  pay_rc (*list_refunds)(const char *intent, pay_refund *out, int max, int *n, pay_error *err);
  pay_rc (*create_account)(const char *email, const char *provider_id, const char *idem_key, pay_account *out,
                           pay_error *err);
  pay_rc (*retrieve_account)(const char *account, pay_account *out, pay_error *err);
  pay_rc (*account_link)(const char *account, const char *refresh_url, const char *return_url, char url[PAY_URL_LEN],
                         pay_error *err);
  pay_rc (*transfer)(const char *destination, int64_t cents, const char *source_intent, const char *job_id,
                     const char *transfer_id, const char *idem_key, pay_transfer *out, pay_error *err);
  pay_rc (*find_transfer)(const char *destination, const char *idem_key, pay_transfer *out, pay_error *err);
  pay_rc (*reverse_transfer)(const char *transfer, int64_t cents, const char *idem_key, pay_reversal *out,
                             pay_error *err);
  pay_rc (*find_reversal)(const char *transfer, const char *idem_key, pay_reversal *out, pay_error *err);
  pay_rc (*retrieve_dispute)(const char *dispute, pay_dispute *out, pay_error *err);
  pay_rc (*upload_file)(const char *name, const char *type, const void *bytes, size_t len, char id[PAY_ID_LEN],
                        pay_error *err);
  pay_rc (*submit_evidence)(const char *dispute, const pay_evidence *ev, const char *idem_key, pay_dispute *out,
                            pay_error *err);
  /* NULL where the processor hosts its own onboarding (Stripe) */
  pay_rc (*open_link)(const char *link_id, char account[PAY_ID_LEN], char return_url[PAY_URL_LEN], pay_error *err);
} pay_ops;

extern const pay_ops paysim_ops;
extern const pay_ops stripe_ops;

/* An implementation's table, written once for both: every operation is the function named
 * <prefix>_<operation> (st_refund, sim_refund); label is its name in logs, open_link its hosted
 * onboarding page's handler or NULL. */
#define PAY_OPS(prefix, label, open_link_fn)                                                                           \
  {                                                                                                                    \
    .name = label, .create_customer = prefix##_create_customer, .create_setup_intent = prefix##_create_setup_intent,   \
    .attach_method = prefix##_attach_method, .retrieve_method = prefix##_retrieve_method,                              \
    .create_intent = prefix##_create_intent, .capture = prefix##_capture, .cancel = prefix##_cancel,                   \
    .create_subscription = prefix##_create_subscription, .update_subscription = prefix##_update_subscription,          \
    .retrieve_subscription = prefix##_retrieve_subscription, .retrieve_intent = prefix##_retrieve_intent,              \
    .find_intent = prefix##_find_intent, .find_subscription = prefix##_find_subscription, .refund = prefix##_refund,   \
    .list_refunds = prefix##_list_refunds, .create_account = prefix##_create_account,                                  \
    .retrieve_account = prefix##_retrieve_account, .account_link = prefix##_account_link,                              \
    .transfer = prefix##_transfer, .find_transfer = prefix##_find_transfer,                                            \
    .reverse_transfer = prefix##_reverse_transfer, .find_reversal = prefix##_find_reversal,                            \
    .retrieve_dispute = prefix##_retrieve_dispute, .upload_file = prefix##_upload_file,                                \
    .submit_evidence = prefix##_submit_evidence, .open_link = open_link_fn,                                            \
  }

/* Reads Stripe-shaped JSON objects into the result structs (both implementations speak it). */
void pay_card_from_json(json_t *pm, pay_card *card);
void pay_intent_from_json(json_t *pi, pay_intent *out);
void pay_subscription_from_json(json_t *sub, pay_subscription *out);
void pay_refund_from_json(json_t *re, pay_refund *out);
void pay_account_from_json(json_t *acct, pay_account *out);
void pay_transfer_from_json(json_t *tr, pay_transfer *out);
void pay_reversal_from_json(json_t *trr, pay_reversal *out);
void pay_dispute_from_json(json_t *du, pay_dispute *out);
/* An operation's answer: *out read from o when rc is PAY_OK (else left as it was); o is
 * released (it may be NULL); returns rc. */
pay_rc pay_intent_answer(json_t *o, pay_rc rc, pay_intent *out);
pay_rc pay_subscription_answer(json_t *o, pay_rc rc, pay_subscription *out);
pay_rc pay_refund_answer(json_t *o, pay_rc rc, pay_refund *out);
pay_rc pay_account_answer(json_t *o, pay_rc rc, pay_account *out);
pay_rc pay_transfer_answer(json_t *o, pay_rc rc, pay_transfer *out);
pay_rc pay_reversal_answer(json_t *o, pay_rc rc, pay_reversal *out);
pay_rc pay_dispute_answer(json_t *o, pay_rc rc, pay_dispute *out);
/* The idempotency key a Stripe-shaped object carries in its metadata, or NULL. */
const char *pay_metadata_key(json_t *o);
/* stripe.c: the processor refused the key (401/403; refused) or accepted a call (!refused). */
void pay_auth_result(bool refused);
/* stripe.c: whether a call may be sent now (false while unauthorized, but for one probe an
 * hour); a unit of background work that is refused is told to wait for the next probe. */
bool pay_auth_may_call(void);

#endif
