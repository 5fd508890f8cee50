/* The seeder is a client of the API: each step is one request, checked for the status the
 * API documents, and the first unexpected answer stops the run with that answer printed.
 * Accounts have fixed emails, so a second run finds them (409 on the first registration) and
 * only prints the logins. Providers are verified with the sample licence images, and the run
 * waits (60 s at most) until recognition has read them, so the data is complete when it ends.
 * Each provider then sets up its payout account through the simulated processor's onboarding
 * link (with Stripe, the link is printed for a person to follow), so what the demo jobs earn
 * is paid out once their report window has passed. */
#include "demo.h"
#include "core/util.h"
#include "ext/fetch.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define PASSWORD "demo-password"
#define TIMEOUT_MS 60000 /* an upload, a payment */

typedef struct demo {
  const char *base, *examples;
  bool failed;
} demo;

typedef struct account {
  const char *email, *name, *zip, *card; /* customers: card is a test PaymentMethod id or NULL */
  const char *company, *services, *zips; /* providers: JSON arrays as text */
  const char *note;
  char token[1024], id[64];
} account;

static account customers[] = {
    {"olivia@demo.example", "Olivia Premium", "10001", "pm_card_visa", .note = "premium, visa 4242, two addresses"},
    {"ben@demo.example", "Ben Basic", "10002", "pm_card_mastercard", .note = "mastercard 4444"},
    {"dana@demo.example", "Dana Declined", "10003", "pm_card_chargeDeclined", .note = "a card that is always declined"},
};
static account providers[] = {
    {"greenacres@demo.example", "Pat Green", .company = "Green Acres Lawn Co",
     .services = "[\"lawncare\",\"snowplowing\"]", .zips = "[\"10001\",\"10002\",\"10003\"]",
     .note = "verified, insured, payouts enabled, lawncare and snowplowing"},
    {"handy@demo.example", "Sam Handy", .company = "Handy Hands", .services = "[\"handyman\",\"home_cleaning\"]",
     .zips = "[\"10001\",\"10002\",\"10003\"]", .note = "verified, payouts enabled, handyman and home cleaning"},
    {"sparkle@demo.example", "Riley Sparkle", .company = "Sparkle Clean", .services = "[\"home_cleaning\"]",
     .zips = "[\"10001\",\"10003\"]", .note = "verified, payouts enabled, home cleaning"},
};
enum { OLIVIA, BEN, DANA };
enum { GREEN, HANDY, SPARKLE };

/* One request; the answer when its status is `expect` (new reference, JSON null for an empty
 * body), else NULL with the failure printed. body is stolen. */
static json_t *call(demo *d, const char *method, const char *path, const char *token, json_t *body, long expect,
                    const fetch_file *files, int nfiles) {
  if (d->failed) return json_decref(body), NULL;
  char url[1024];
  snprintf(url, sizeof url, "%s%s", d->base, path);
  long status = 0;
  json_t *answer = NULL;
  fetch_request(method, url, token, body, files, nfiles, TIMEOUT_MS, &status, &answer);
  json_decref(body);
  if (status == expect) return answer ? answer : json_null();
  char *text = answer ? json_dumps(answer, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  if (status)
    fprintf(stderr, "demo: %s %s answered %ld, expected %ld: %s\n", method, path, status, expect, text ? text : "");
  else
    fprintf(stderr, "demo: %s %s: no answer\n", method, url);
  free(text);
  json_decref(answer);
  d->failed = true;
  return NULL;
}

/* A call whose answer is not needed. */
static void step(demo *d, const char *method, const char *path, const char *token, json_t *body, long expect) {
  json_decref(call(d, method, path, token, body, expect, NULL, 0));
}

static void upload(demo *d, const char *path, const char *token, const char *field, const char *file) {
  char local[1024];
  snprintf(local, sizeof local, "%s/%s", d->examples, file);
  fetch_file f = {field, local};
  json_decref(call(d, "POST", path, token, NULL, 200, &f, 1));
}

/* Copies the token and the account's id out of a registration answer. */
static void keep_login(demo *d, json_t *answer, const char *who, account *a) {
  if (!answer) return;
  snprintf(a->token, sizeof a->token, "%s", json_string_value(json_object_get(answer, "token")));
  snprintf(a->id, sizeof a->id, "%s", json_string_value(json_object_get(json_object_get(answer, who), "id")));
  json_decref(answer);
  (void)d;
}

static void make_customer(demo *d, account *c) {
  keep_login(d,
             call(d, "POST", "/auth/register", NULL,
                  json_pack("{s:s,s:s,s:s,s:s,s:s}", "email", c->email, "password", PASSWORD, "name", c->name,
                            "address", "350 5th Ave, New York, NY", "zip", c->zip),
                  201, NULL, 0),
             "user", c);
  step(d, "POST", "/payments/payment-method", c->token, json_pack("{s:s}", "paymentMethodId", c->card), 200);
}

static void upload_licence(demo *d, account *p) {
  char front[1024], back[1024];
  snprintf(front, sizeof front, "%s/licence-front.png", d->examples);
  snprintf(back, sizeof back, "%s/licence-back.png", d->examples);
  fetch_file licence[] = {{"front", front}, {"back", back}};
  json_decref(call(d, "POST", "/providers/me/id-documents", p->token, NULL, 200, licence, 2));
}

static void upload_insurance(demo *d, account *p) {
  upload(d, "/providers/me/insurance-document", p->token, "insuranceDoc", "insurance-certificate.png");
}

static void make_provider(demo *d, account *p) {
  json_t *body =
      json_pack("{s:s,s:s,s:s,s:s,s:o,s:o}", "email", p->email, "password", PASSWORD, "name", p->name, "phone",
                "555-0100", "serviceZips", json_loads(p->zips, 0, NULL), "services", json_loads(p->services, 0, NULL));
  keep_login(d, call(d, "POST", "/auth/provider/register", NULL, body, 201, NULL, 0), "provider", p);
  step(d, "PATCH", "/providers/me", p->token, json_pack("{s:s}", "companyName", p->company), 200);
  upload(d, "/providers/me/logo", p->token, "logo", "logo.png");
  upload(d, "/providers/me/headshots", p->token, "headshot", "headshot.png");
  upload_licence(d, p);
}

/* Sets up p's payout account: the simulated processor's onboarding page (served by the binary)
 * is opened on the demo's own server; a link elsewhere (Stripe's) is printed for a person. */
static void enable_payouts(demo *d, account *p) {
  json_t *link = call(d, "POST", "/providers/me/payout-account", p->token, NULL, 200, NULL, 0);
  const char *url = json_string_value(json_object_get(link, "onboardingUrl"));
  const char *page = url ? strstr(url, "/payouts/onboarding/") : NULL;
  if (page)
    step(d, "GET", page, NULL, NULL, 200);
  else if (url)
    printf("Payout onboarding of %s (open it to enable payouts): %s\n", p->email, url);
  json_decref(link);
}

/* Posts a job for customer c; its id into id (64 bytes). */
static void post_job(demo *d, account *c, const char *service, const char *description, const char *when, char id[64]) {
  json_t *body = json_pack("{s:s,s:s}", "service", service, "description", description);
  if (when)
    json_object_set_new(body, "preferredAt", json_string(when));
  else
    json_object_set_new(body, "isAsap", json_true());
  json_t *job = call(d, "POST", "/jobs", c->token, body, 201, NULL, 0);
  snprintf(id, 64, "%s", job ? json_string_value(json_object_get(job, "id")) : "");
  json_decref(job);
}

/* Provider p quotes job at amount; the quote's id into id (64 bytes). */
static void quote(demo *d, account *p, const char *job, double amount, char id[64]) {
  json_t *q = call(d, "POST", "/quotes", p->token,
                   json_pack("{s:s,s:f,s:s}", "jobId", job, "amount", amount, "note", "Tools and disposal included"),
                   201, NULL, 0);
  snprintf(id, 64, "%s", q ? json_string_value(json_object_get(q, "id")) : "");
  json_decref(q);
}

static void accept(demo *d, account *c, const char *quote_id) {
  char path[256];
  snprintf(path, sizeof path, "/quotes/%s/accept", quote_id);
  step(d, "POST", path, c->token, NULL, 200);
}

/* Walks an accepted job to status: ON_THE_WAY, IN_PROGRESS (with a photo) or COMPLETED. */
static void progress(demo *d, account *p, const char *job, const char *status) {
  char path[256];
  snprintf(path, sizeof path, "/jobs/%s/status", job);
  step(d, "PATCH", path, p->token,
       json_pack("{s:s,s:f,s:f}", "status", "ON_THE_WAY", "fromLat", 40.7128, "fromLng", -74.006), 200);
  if (!strcmp(status, "ON_THE_WAY")) return;
  snprintf(path, sizeof path, "/jobs/%s/start", job);
  upload(d, path, p->token, "images", "lawn-before.jpg");
  if (!strcmp(status, "IN_PROGRESS")) return;
  snprintf(path, sizeof path, "/jobs/%s/complete", job);
  upload(d, path, p->token, "images", "lawn-after.jpg");
}

static void message(demo *d, account *who, const char *job, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "/jobs/%s/messages", job);
  step(d, "POST", path, who->token, json_pack("{s:s}", "content", text), 201);
}

static void review(demo *d, account *c, const char *job, int rating, const char *comment) {
  step(d, "POST", "/reviews", c->token, json_pack("{s:s,s:i,s:s}", "jobId", job, "rating", rating, "comment", comment),
       201);
}

static void jobs(demo *d) {
  account *olivia = &customers[OLIVIA], *ben = &customers[BEN], *dana = &customers[DANA];
  account *green = &providers[GREEN], *handy = &providers[HANDY], *sparkle = &providers[SPARKLE];
  char job[64], q1[64], q2[64], path[256];
  post_job(d, olivia, "lawncare", "Spring clean-up of the back garden", "2031-04-05T09:00:00.000Z", job);

  post_job(d, olivia, "lawncare", "Rake the leaves (plans changed)", "2031-04-08T09:00:00.000Z", job);
  snprintf(path, sizeof path, "/jobs/%s/cancel", job);
  step(d, "POST", path, olivia->token, NULL, 200); /* CANCELLED */

  post_job(d, olivia, "home_cleaning", "Deep clean of a two-bedroom flat", "2031-04-12T13:00:00.000Z", job);
  quote(d, handy, job, 140, q1);
  quote(d, sparkle, job, 120, q2);

  post_job(d, olivia, "lawncare", "Weekly mowing, front and back", "2031-04-19T09:00:00.000Z", job);
  quote(d, green, job, 60, q1);
  accept(d, olivia, q1);
  message(d, olivia, job, "The gate code is 1234.");
  message(d, green, job, "Thanks, see you Saturday morning.");

  post_job(d, olivia, "lawncare", "Mow and edge before the party", "2031-03-29T09:00:00.000Z", job);
  quote(d, green, job, 75, q1);
  accept(d, olivia, q1);
  progress(d, green, job, "COMPLETED");
  message(d, olivia, job, "Looks wonderful, thank you!");
  snprintf(path, sizeof path, "/jobs/%s/tip", job);
  step(d, "POST", path, olivia->token, json_pack("{s:i}", "amount", 10), 200);
  review(d, olivia, job, 5, "On time and very tidy.");

  post_job(d, ben, "handyman", "Fix a squeaky door and hang two shelves", "2031-03-22T10:00:00.000Z", job);
  quote(d, handy, job, 150, q1);
  accept(d, ben, q1);
  progress(d, handy, job, "COMPLETED");
  review(d, ben, job, 4, "Good work, a little late.");

  post_job(d, ben, "handyman", "Assemble a wardrobe", "2031-04-02T15:00:00.000Z", job);
  quote(d, handy, job, 90, q1);
  accept(d, ben, q1);
  progress(d, handy, job, "IN_PROGRESS");

  post_job(d, ben, "handyman", "Clear the gutters", "2031-03-30T11:00:00.000Z", job);
  quote(d, handy, job, 110, q1);
  accept(d, ben, q1);
  progress(d, handy, job, "ON_THE_WAY");

  post_job(d, ben, "snowplowing", "Driveway blocked by snow", NULL, job); /* ASAP, open */

  post_job(d, dana, "lawncare", "Trim the hedges", "2031-04-26T09:00:00.000Z", job);
  quote(d, green, job, 85, q1);
  accept(d, dana, q1); /* the declined card: accepted, payment FAILED */
}

/* Waits until recognition has read every provider's documents (60 s at most). */
/* True when a check ended as unreadable: recognition ran out of time (a loaded machine), not a
 * verdict on the sample, which reads well. */
static bool unreadable(json_t *me, const char *status_field, const char *flags_field) {
  const char *status = json_string_value(json_object_get(me, status_field));
  if (!status || strcmp(status, "failed")) return false;
  size_t i;
  json_t *flag;
  json_array_foreach(json_object_get(me, flags_field), i, flag) {
    const char *f = json_string_value(flag);
    if (f && !strcmp(f, "unreadable")) return true;
  }
  return false;
}

/* Waits for each provider's checks; a document that read as unreadable is sent again (three
 * times at most), so every demo provider ends verified. */
static void wait_for_checks(demo *d) {
  for (size_t i = 0; i < ARRAY_LEN(providers) && !d->failed; i++) {
    for (int round = 0, tries = 0; tries < 600 && !d->failed; tries++) {
      json_t *me = call(d, "GET", "/providers/me", providers[i].token, NULL, 200, NULL, 0);
      const char *id = json_string_value(json_object_get(me, "idCheckStatus"));
      const char *ins = json_string_value(json_object_get(me, "insCheckStatus"));
      bool done = !me || (id && strcmp(id, "pending") && (!ins || strcmp(ins, "pending")));
      bool again = done && me && round < 3;
      bool id_again = again && unreadable(me, "idCheckStatus", "idCheckFlags");
      bool ins_again = again && unreadable(me, "insCheckStatus", "insCheckFlags");
      json_decref(me);
      if (id_again) upload_licence(d, &providers[i]);
      if (ins_again) upload_insurance(d, &providers[i]);
      if (id_again || ins_again) {
        round++;
        continue;
      }
      if (done) break;
      usleep(100 * 1000);
    }
  }
}

static void print_logins(const char *base) {
  (void)base;
  printf("Demo accounts (password for every account: %s)\n\n", PASSWORD);
  printf("  %-9s %-26s %s\n", "role", "email", "what");
  for (size_t i = 0; i < ARRAY_LEN(customers); i++)
    printf("  %-9s %-26s %s\n", "customer", customers[i].email, customers[i].note);
  for (size_t i = 0; i < ARRAY_LEN(providers); i++)
    printf("  %-9s %-26s %s\n", "provider", providers[i].email, providers[i].note);
  printf("\nCustomers log in with POST /auth/login, providers with POST /auth/provider/login.\n");
}

int demo_seed(const char *base_url, const char *examples_dir) {
  demo d = {.base = base_url, .examples = examples_dir};
  char probe[1024];
  snprintf(probe, sizeof probe, "%s/licence-front.png", examples_dir);
  if (access(probe, R_OK) != 0) {
    fprintf(stderr, "demo: the sample files are missing (%s); run it from the repository's root\n", probe);
    return 1;
  }
  char url[1024];
  snprintf(url, sizeof url, "%s/auth/login", base_url);
  long status = 0;
  json_t *answer = NULL;
  json_t *login = json_pack("{s:s,s:s}", "email", customers[OLIVIA].email, "password", PASSWORD);
  fetch_request("POST", url, NULL, login, NULL, 0, TIMEOUT_MS, &status, &answer);
  json_decref(login);
  json_decref(answer);
  if (!status) return fprintf(stderr, "demo: POST %s: no answer\n", url), 1;
  if (status == 200) {
    printf("The demo accounts exist already; nothing was changed.\n");
    print_logins(base_url);
    return 0;
  }
  for (size_t i = 0; i < ARRAY_LEN(customers); i++) make_customer(&d, &customers[i]);
  for (size_t i = 0; i < ARRAY_LEN(providers); i++) make_provider(&d, &providers[i]);
  upload_insurance(&d, &providers[GREEN]);
  step(&d, "POST", "/payments/premium/subscribe", customers[OLIVIA].token, NULL, 200);
  step(&d, "POST", "/users/me/addresses", customers[OLIVIA].token,
       json_pack("{s:s,s:s,s:s}", "label", "Home", "address", "350 5th Ave, New York, NY", "zip", "10001"), 201);
  step(&d, "POST", "/users/me/addresses", customers[OLIVIA].token,
       json_pack("{s:s,s:s,s:s}", "label", "Lake house", "address", "12 Shore Rd, New York, NY", "zip", "10003"), 201);
  wait_for_checks(&d);
  for (size_t i = 0; i < ARRAY_LEN(providers); i++) enable_payouts(&d, &providers[i]);
  jobs(&d);
  if (d.failed) return 1;
  print_logins(base_url);
  return 0;
}
