"""claimcheck: the claims registry, its validator, the pytest plugin and the report.

Property tests import the evidence helpers from here::

    from claimcheck import claim_assert, premise, record, refutes
"""
from claimcheck.evidence import (ClaimViolation, ControlAccepted, NoCounterexample, PremiseFailed, claim_assert, control,
                                 premise, record, refutes)

__all__ = ["ClaimViolation", "ControlAccepted", "NoCounterexample", "PremiseFailed", "claim_assert", "control",
           "premise", "record", "refutes"]
