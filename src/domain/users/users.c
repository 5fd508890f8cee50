/* The users domain's declaration (domain/domain.h): its routes, the seasonal alerts' daily
 * work, and its part of an account (the customer's profile, addresses and premium features). */
#include "domain/users/users.h"
#include "core/clock.h"
#include "domain/users/addresses_store.h"
#include "domain/users/users_api.h"
#include "domain/users/users_store.h"

static const domain_job jobs[] = {
    {"seasonal_alerts", users_seasonal_day, .period_ms = DAY_MS},
    {"seasonal_zip", users_seasonal_zip},
    {0},
};

static err_t forget_in(db_conn *c, const account_ref *who, forget_mode mode) {
  err_t e = addresses_store_forget_in(c, who, mode);
  return e ? e : users_store_forget_in(c, who, mode);
}

const domain_def users_domain = {.name = "users",
                                 .routes = users_routes,
                                 .jobs = jobs,
                                 .init = users_profiles_init,
                                 .stop = users_profiles_stop,
                                 .export_in = users_export_in,
                                 .forget_in = forget_in};
