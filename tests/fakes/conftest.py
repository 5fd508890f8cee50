"""Self-tests of the local fakes that stand in for outside services in the API tests (S3,
Stripe). They test the fakes, not the product: `make fakes` runs them, `make test` includes
it, and they never count towards the API tests' route coverage. The fakes themselves live in
tests/api, beside the tests that use them."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
