/* What the simulated processor's files share (paysim.c: objects, intents, Connect;
 * paysim_disputes.c: disputes, evidence files and the events they send). Internal to src/ext.
 *
 * Objects are Stripe-shaped JSON rows of processor_sim_objects; a change is an optimistic
 * update (sim_replace: WHERE data = old), so concurrent calls on one object serialise. */
#ifndef EXT_PAYSIM_IMPL_H
#define EXT_PAYSIM_IMPL_H
#include "ext/payments_impl.h"
#include <jansson.h>
#include <stdbool.h>

/* The object id (owned; NULL when none), and its stored text in *raw (heap) when raw is not NULL. */
json_t *sim_load(const char *id, char **raw);
/* The same when its `object` is kind. */
json_t *sim_load_kind(const char *id, const char *kind, char **raw);
/* An intent, with a lapse that is due applied (NULL when there is no such intent). */
json_t *sim_load_intent(const char *intent);
/* Replaces the stored object when it still reads `old`; false when someone changed it first. */
bool sim_replace(const char *id, const char *old, json_t *o);
/* Stores o of kind (new when old is NULL; else replacing its stored text old, false when it
 * changed meanwhile) and queues the n events Stripe would send for it by webhook (units of
 * work "payment_event" that the payments domain applies), in one transaction. */
bool sim_save_announced(json_t *o, const char *kind, const char *old, json_t *const *events, int n);
/* A new id "<prefix>_sim_...". */
void sim_new_id(const char *prefix, char out[PAY_ID_LEN]);
/* rc, with message in err. */
pay_rc sim_fail(pay_error *err, pay_rc rc, const char *message);
/* The service clock in epoch seconds (Stripe's timestamps). */
int64_t sim_now_s(void);

/* paysim_disputes.c: a charge of intent pi (as stored, just succeeded) paid by a method
 * attached from a dispute test card (pm_card_createDispute, pm_card_createDisputeInquiry) is
 * disputed at once, as in Stripe's test mode. */
void sim_after_charge(json_t *pi);
pay_rc sim_retrieve_dispute(const char *dispute, pay_dispute *out, pay_error *err);
pay_rc sim_upload_file(const char *name, const char *type, const void *bytes, size_t len, char id[PAY_ID_LEN],
                       pay_error *err);
pay_rc sim_submit_evidence(const char *dispute, const pay_evidence *ev, const char *idem_key, pay_dispute *out,
                           pay_error *err);

#endif
