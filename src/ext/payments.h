/* The payment processor, as the rest of the service sees it.
 *
 * Two implementations behind one set of functions, chosen at start-up: the built-in
 * simulated processor (no STRIPE_SECRET_KEY; Stripe's test-mode conventions, state kept in
 * the database) and a Stripe client over libcurl (STRIPE_SECRET_KEY set; requests to
 * STRIPE_API_BASE). Amounts are integer cents. Every call that moves money takes an
 * idempotency key derived from the service's own record, so a retried request, or the same
 * operation run twice, never charges twice. Thread-safe. */
#ifndef EXT_PAYMENTS_H
#define EXT_PAYMENTS_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

typedef enum {
  PAY_OK = 0,
  PAY_DECLINED,    /* the card was refused (Stripe card_error) */
  PAY_INVALID,     /* the request was refused: unknown payment method, wrong state */
  PAY_NOT_FOUND,   /* the object does not exist (any more) at the processor */
  PAY_UNAVAILABLE, /* the processor did not answer, or answered 5xx/429 after retries */
  PAY_IDEMPOTENCY, /* the idempotency key was used before with other parameters (Stripe's
                      idempotency_error): what the first request did must be looked up */
} pay_rc;

#define PAY_ID_LEN 256

typedef struct pay_error {
  char message[256]; /* for logs and, for declines, for the client */
  char code[64];     /* the processor's error code: card_declined, charge_expired_for_capture, ... */
  char decline_code[64];
  char intent_id[PAY_ID_LEN]; /* a declined payment's intent, when the processor made one */
} pay_error;

typedef struct pay_card {
  char id[PAY_ID_LEN];
  char brand[32], last4[8];
  int exp_month, exp_year;
} pay_card;

typedef struct pay_intent {
  char id[PAY_ID_LEN];
  char status[40];        /* requires_capture, succeeded, canceled, requires_payment_method, processing */
  int64_t amount;         /* cents */
  int64_t amount_received; /* cents captured (succeeded): less than amount after a partial capture */
  char card_brand[32], card_last4[8]; /* the card its charge was made on ("" when not known) */
  char idem_key[PAY_ID_LEN];          /* its metadata[idempotency_key]: the request that made it */
  int64_t capture_before; /* epoch ms after which an uncaptured authorization lapses; 0 when none */
  char error_code[64], error_message[256]; /* last_payment_error of a declined intent */
} pay_intent;

typedef struct pay_subscription {
  char id[PAY_ID_LEN];
  char status[40]; /* active, trialing, past_due, canceled, incomplete, ... */
  bool cancel_at_period_end;
  int64_t current_period_end; /* epoch ms; 0 when unknown */
} pay_subscription;

typedef struct pay_refund {
  char id[PAY_ID_LEN];
  char status[24];           /* succeeded, pending (both: the money goes back), failed, canceled */
  int64_t amount;            /* cents */
  char idem_key[PAY_ID_LEN]; /* its metadata[idempotency_key]; "" for a refund made at the processor */
} pay_refund;

/* What a charge says of itself: on the processor's Dashboard (description, metadata job_id,
 * quote_id and kind), on the customer's card statement (STATEMENT_DESCRIPTOR_SUFFIX) and for
 * the transfers it funds (transfer_group: the job id). */
typedef struct pay_charge_info {
  const char *description; /* "Lawncare job c..." */
  const char *job_id;      /* transfer_group and metadata[job_id] */
  const char *quote_id;    /* metadata[quote_id]; NULL for none (a tip) */
  const char *kind;        /* metadata[kind]: "job" or "tip" */
} pay_charge_info;

/* Picks the implementation from the configuration (call once at start-up). */
void payments_init(void);
/* "simulated" or "stripe". */
const char *payments_mode(void);

/* Whether the processor refused the service's own key (Stripe's 401 or 403: a key revoked,
 * rolled or restricted) and no call has succeeded since. While it does, calls are not sent
 * but one an hour (the first after the hour probes the processor; the others answer
 * PAY_UNAVAILABLE at once), and a unit of background work that meets it is tried again no
 * sooner than that probe, without its attempt counting (queue_retry_at). */
bool payments_unauthorized(void);
/* Refusals of the key counted since start (a metric). */
long payments_auth_failures(void);

pay_rc payments_create_customer(const char *email, const char *name, const char *idem_key, char id[PAY_ID_LEN],
                                pay_error *err);
/* A SetupIntent for saving a card off-session; writes its client secret. */
pay_rc payments_create_setup_intent(const char *customer, char secret[PAY_ID_LEN], pay_error *err);
/* Attaches payment_method to customer (and makes it the customer's default); the card
 * details come back in card, whose id is the method to charge from now on. */
pay_rc payments_attach_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err);
/* PAY_NOT_FOUND when the method no longer exists or is no longer attached to customer. */
pay_rc payments_retrieve_method(const char *customer, const char *payment_method, pay_card *card, pay_error *err);
/* An off-session card authorization with manual capture (status requires_capture), described
 * by info. The intent carries idem_key in its metadata, so payments_find_intent can find it
 * again. */
pay_rc payments_authorize(const char *customer, const char *payment_method, int64_t cents,
                          const pay_charge_info *info, const char *idem_key, pay_intent *out, pay_error *err);
pay_rc payments_capture(const char *intent, const char *idem_key, pay_intent *out, pay_error *err);
/* Cancels (voids) an uncaptured authorization. */
pay_rc payments_void(const char *intent, const char *idem_key, pay_intent *out, pay_error *err);
/* An off-session card charge captured at once (tips, charges without a live authorization). */
pay_rc payments_charge(const char *customer, const char *payment_method, int64_t cents, const pay_charge_info *info,
                       const char *idem_key, pay_intent *out, pay_error *err);
/* The intent as the processor has it now (status, amount, hold expiry, last error). */
pay_rc payments_retrieve_intent(const char *intent, pay_intent *out, pay_error *err);
/* The intent that payments_authorize or payments_charge made for customer under idem_key:
 * PAY_OK with it in out, PAY_NOT_FOUND when the processor holds none (nothing was made),
 * PAY_UNAVAILABLE when it could not be asked. */
pay_rc payments_find_intent(const char *customer, const char *idem_key, pay_intent *out, pay_error *err);
/* Refunds cents of a captured intent (0: all that is left of it) under idem_key, which the
 * refund also carries in its metadata (payments_list_refunds finds it again). reason is one of
 * Stripe's: "requested_by_customer" or "duplicate". PAY_INVALID when refused (the intent is not
 * captured, nothing is left to refund, or cents is more than is left: err->code says which). */
pay_rc payments_refund(const char *intent, int64_t cents, const char *reason, const char *idem_key, pay_refund *out,
                       pay_error *err);
/* A Stripe refund object (as events carry them) read into out. */
void payments_read_refund(json_t *refund, pay_refund *out);
/* The refunds of intent, newest first: at most max of them into out, their number in *n.
 * PAY_NOT_FOUND when the intent does not exist. */
pay_rc payments_list_refunds(const char *intent, pay_refund *out, int max, int *n, pay_error *err);
/* A subscription on price, paid by payment_method; PAY_DECLINED when the first invoice fails.
 * The subscription carries idem_key in its metadata (payments_find_subscription). */
pay_rc payments_create_subscription(const char *customer, const char *price, const char *payment_method,
                                    const char *idem_key, pay_subscription *out, pay_error *err);
pay_rc payments_set_cancel_at_period_end(const char *subscription, bool cancel, const char *idem_key,
                                         pay_subscription *out, pay_error *err);
pay_rc payments_retrieve_subscription(const char *subscription, pay_subscription *out, pay_error *err);
/* The subscription payments_create_subscription made for customer under idem_key: PAY_OK,
 * PAY_NOT_FOUND (none was made) or PAY_UNAVAILABLE. */
pay_rc payments_find_subscription(const char *customer, const char *idem_key, pay_subscription *out, pay_error *err);

/* ---- Connect: payouts to providers (separate charges and transfers) ---- */

#define PAY_URL_LEN 1024

/* A connected account as the processor has it. */
typedef struct pay_account {
  char id[PAY_ID_LEN];
  bool transfers_active;     /* capabilities.transfers is "active": transfers can be made to it */
  bool payouts_enabled;      /* it can pay its balance out to its bank */
  bool details_submitted;    /* onboarding was finished once */
  char disabled_reason[128]; /* requirements.disabled_reason, "" when none */
  char requirements[2048];   /* requirements.currently_due as a JSON array (text) */
} pay_account;

/* A transfer from the platform's balance to a connected account. */
typedef struct pay_transfer {
  char id[PAY_ID_LEN];
  char destination[PAY_ID_LEN];
  int64_t amount, amount_reversed; /* cents */
  char idem_key[PAY_ID_LEN];       /* its metadata[idempotency_key] */
} pay_transfer;

/* A reversal of (part of) a transfer. */
typedef struct pay_reversal {
  char id[PAY_ID_LEN];
  int64_t amount; /* cents */
  char idem_key[PAY_ID_LEN];
} pay_reversal;

/* A connected account for a provider (Stripe: an Express account in the US with the transfers
 * capability requested), made once under idem_key; metadata carries provider_id. */
pay_rc payments_create_account(const char *email, const char *provider_id, const char *idem_key, pay_account *out,
                               pay_error *err);
/* The account as it stands now; PAY_NOT_FOUND when the processor does not know it. */
pay_rc payments_retrieve_account(const char *account, pay_account *out, pay_error *err);
/* A Stripe account object (as account.updated events carry it) read into out. */
void payments_read_account(json_t *account, pay_account *out);
/* A fresh onboarding link for account (Stripe: an account_onboarding Account Link) whose
 * return and refresh addresses are the given ones; its address into url. */
pay_rc payments_account_link(const char *account, const char *refresh_url, const char *return_url,
                             char url[PAY_URL_LEN], pay_error *err);
/* Transfers cents (USD) to destination under idem_key, which the transfer also carries in its
 * metadata (payments_find_transfer finds it again) with job_id (also its transfer_group, as the
 * job's charges) and transfer_id. source_intent
 * (may be NULL): the PaymentIntent whose charge funds it (Stripe's source_transaction, so the
 * transfer does not wait for the charge to become available). PAY_INVALID when refused
 * (err->code: insufficient_capabilities_for_transfer when the account cannot receive,
 * balance_insufficient, ...). */
pay_rc payments_transfer(const char *destination, int64_t cents, const char *source_intent, const char *job_id,
                         const char *transfer_id, const char *idem_key, pay_transfer *out, pay_error *err);
/* The transfer payments_transfer made to destination under idem_key: PAY_OK, PAY_NOT_FOUND
 * (none was made) or PAY_UNAVAILABLE. */
pay_rc payments_find_transfer(const char *destination, const char *idem_key, pay_transfer *out, pay_error *err);
/* Reverses cents of transfer under idem_key (carried in the reversal's metadata). PAY_INVALID
 * when refused (more than is left to reverse: err->code). */
pay_rc payments_reverse_transfer(const char *transfer, int64_t cents, const char *idem_key, pay_reversal *out,
                                 pay_error *err);
/* The reversal of transfer made under idem_key: PAY_OK, PAY_NOT_FOUND or PAY_UNAVAILABLE. */
pay_rc payments_find_reversal(const char *transfer, const char *idem_key, pay_reversal *out, pay_error *err);
/* ---- disputes (chargebacks) ---- */

/* A dispute of a charge as the processor has it. status is Stripe's: warning_needs_response,
 * warning_under_review, warning_closed (an inquiry), needs_response, under_review, won, lost. */
typedef struct pay_dispute {
  char id[PAY_ID_LEN], intent_id[PAY_ID_LEN], charge_id[PAY_ID_LEN];
  char status[40], reason[64];
  int64_t amount;          /* cents disputed */
  int64_t evidence_due_by; /* epoch ms; 0 when none */
  int submissions;         /* evidence submissions so far */
} pay_dispute;

/* A Stripe dispute object (as charge.dispute.* events carry it) read into out. */
void payments_read_dispute(json_t *dispute, pay_dispute *out);
pay_rc payments_retrieve_dispute(const char *dispute, pay_dispute *out, pay_error *err);

/* The evidence of a dispute answer: Stripe's evidence fields. Files are ids that
 * payments_upload_file gave; any field may be NULL. */
typedef struct pay_evidence {
  const char *text;                /* uncategorized_text */
  const char *product_description; /* what was sold: the job */
  const char *customer_name, *customer_email;
  const char *service_date;           /* YYYY-MM-DD */
  const char *service_documentation;  /* a file: the job's photos */
  const char *customer_communication; /* a file: photos from the job's messages */
} pay_evidence;

/* Uploads a file for dispute evidence (Stripe's Files API, purpose dispute_evidence; name and
 * type such as "evidence.pdf", "application/pdf"); its id into id. */
pay_rc payments_upload_file(const char *name, const char *type, const void *bytes, size_t len, char id[PAY_ID_LEN],
                            pay_error *err);
/* Sends evidence for dispute and submits it (the processor decides from it; nothing can be
 * added afterwards). PAY_INVALID when refused (closed, past its deadline: err says). */
pay_rc payments_submit_evidence(const char *dispute, const pay_evidence *ev, const char *idem_key, pay_dispute *out,
                                pay_error *err);

/* The simulated processor's hosted onboarding (its account links point at the service's own
 * page): opens link link_id, which finishes the onboarding of its account (transfers active,
 * payouts enabled). The account's id into account, the link's return address into return_url.
 * PAY_NOT_FOUND for an unknown link, PAY_INVALID (err->code account_link_expired) for one used
 * before or past its expiry, and PAY_INVALID in Stripe mode, whose links go to Stripe. */
pay_rc payments_sim_open_link(const char *link_id, char account[PAY_ID_LEN], char return_url[PAY_URL_LEN],
                              pay_error *err);

/* The price of the customer premium subscription (STRIPE_PREMIUM_PRICE_ID, or the simulated
 * processor's built-in 9.99/month price); NULL with Stripe and no configured price. */
const char *payments_premium_price(void);

#endif
