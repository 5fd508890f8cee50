"""Self-tests of the local fakes that stand in for outside services in the API tests (S3,
Stripe) and of the tests' Server-Sent Events client. They test the tools, not the product:
`make fakes` runs them, `make test` includes it, and they never count towards the API tests'
route coverage. The fakes and the client themselves live in tests/api, beside the tests that
use them."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
