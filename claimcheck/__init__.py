"""claimcheck: the claims registry, its validator, the pytest plugin and the report.

Property tests import the evidence helpers from here::

    from claimcheck import claim_assert, premise, record, refutes
"""
from claimcheck.evidence import (ClaimViolation, ControlAccepted, ControlMisfired, NoCounterexample, PremiseFailed,
                                 claim_assert, comparator_check, control, premise, record, refutes)

__all__ = ["ClaimViolation", "ControlAccepted", "ControlMisfired", "NoCounterexample", "PremiseFailed", "claim_assert",
           "comparator_check", "control", "premise", "record", "refutes"]
