"""What the tests share: helpers, peers, strategies and harnesses, imported
as ``tests.support.<module>``.

Test modules import from here (or take fixtures from a conftest.py), never
from one another: a helper two test modules need lives here.
"""
