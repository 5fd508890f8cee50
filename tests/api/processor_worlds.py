"""The two payment processors of a test module (test_payouts.py, test_money.py, test_disputes.py,
and the Stripe part of test_payments.py): the simulated one, and the real Stripe client against
tests/api/fake_stripe.py, each behind a server of its own whose clock the module moves by days.

The module's fixtures stay in the module, each a line that yields from one of these:
- `started_fake_stripe()`: the module's fake Stripe, with the Preferred Pro price PRICE.
- `worlds_of(make_server, fake_stripe, make_world, stripe_env)`: get(mode), the module's world of
  "simulated" or "stripe" (make_world(mode, server, fake), made on first use); after the module,
  the money-conservation check (money.py) on every world made.
- `world_in_step(worlds, fake_stripe, mode)`: one test's world, the fake's failure controls reset
  before and after it and the fake's clock at the service's.
"""
from conftest import ADMIN_ENV
from fake_stripe import FakeStripe
from money import assert_all_conserved

PRICE = "price_premium"


def started_fake_stripe():
    """Yields a started FakeStripe that sells PRICE at $9.99, and stops it after."""
    fake = FakeStripe(api_key="sk_test_fake", prices={PRICE: 999}).start()
    yield fake
    fake.stop()


def worlds_of(make_server, fake_stripe, make_world, stripe_env):
    """Yields get(mode), each processor's world made once; then checks that every cent they charged is accounted for."""
    made = {}

    def get(mode):
        if mode not in made:
            if mode == "stripe":
                srv = make_server(STRIPE_API_BASE=fake_stripe.url, **stripe_env, **ADMIN_ENV)
                made[mode] = make_world(mode, srv, fake_stripe)
            else:
                made[mode] = make_world(mode, make_server(**ADMIN_ENV))
        return made[mode]

    yield get
    fake_stripe.reset_controls()
    assert_all_conserved((world.server, world.fake) for world in made.values())


def world_in_step(worlds, fake_stripe, mode):
    """Yields the world of mode, its clock synced, with the fake's failure controls reset before and after."""
    fake_stripe.reset_controls()
    world = worlds(mode)
    world.sync()
    yield world
    fake_stripe.reset_controls()
