"""claimcheck: the claims registry, its validator, the pytest plugin and the report.

Property tests import the evidence helpers from here::

    from claimcheck import claim_assert, record, refutes
"""
from claimcheck.evidence import ClaimViolation, NoCounterexample, claim_assert, record, refutes

__all__ = ["ClaimViolation", "NoCounterexample", "claim_assert", "record", "refutes"]
