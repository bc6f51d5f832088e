"""Evidence helpers used inside property tests.

Two kinds of evidence back a claim:

* a *property*: an ordinary test (usually Hypothesis ``@given``) that asserts the statement
  holds; it passes when no counterexample is found.
* a *refutation*: a test decorated with :func:`refutes` that states the claim as written and
  passes only when the statement is violated; the (shrunk) counterexample is recorded.

Only a :class:`ClaimViolation` (raised by :func:`claim_assert`) counts as a counterexample: any
other exception is a crash of the evidence and is reported as ``error``, never as ``refuted``.
What a construction must satisfy for its counterexample to mean anything is checked with
:func:`premise`: a failed premise is an error of the evidence (:class:`PremiseFailed`), never a
counterexample to the claim.
"""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable

__all__ = ["ClaimViolation", "ControlAccepted", "ControlMisfired", "NoCounterexample", "PremiseFailed", "claim_assert",
           "comparator_check", "control", "premise", "record", "refutes"]


class ClaimViolation(AssertionError):
    """The statement under test is false on a concrete example."""

    def __init__(self, message: str, example: dict[str, Any] | None = None):
        self.message = message
        self.example = {k: _plain(v) for k, v in (example or {}).items()}
        detail = "".join(f"\n    {k} = {_show(v)}" for k, v in self.example.items())
        super().__init__(message + detail)


class NoCounterexample(AssertionError):
    """A refutation ran to completion without violating the claim."""


class ControlAccepted(AssertionError):
    """A negative control passed: the evidence accepted a deliberately wrong variant, so it cannot fail."""


class ControlMisfired(Exception):
    """A negative control's variant was stopped by something other than the claim's own check (a plain
    AssertionError, a crash, an exception group mixing kinds): the control shows nothing about the claim.

    Deliberately not an AssertionError: the control ends as ``error`` and the run fails."""


def control(reason: str, models: str | list[str] | tuple[str, ...] | None = None):
    """Mark a test, or one parameter of a test (``pytest.param(..., marks=control("..."))``), as a
    negative control: the same check run against a deliberately wrong variant of the claim (a
    perturbed formula, a wrong constant, a flipped sign, a broken implementation). The plugin runs it
    with few examples and no shrinking; it passes only when the claim's own check rejects the variant
    (a :class:`ClaimViolation` from :func:`claim_assert`); any other exception is an error of the
    evidence (:class:`ControlMisfired`), and a control that passes makes the run fail.

    ``models`` names the claims whose falsity the variant models: the control is credited to those
    claims only. It may be left out when the test is evidence for one claim; a control of a test for
    several claims that does not name them is run, but credited to none."""
    import pytest

    if not reason:
        raise TypeError("control(reason): say what is wrong with the variant")
    if models is None:
        return pytest.mark.control(reason)
    models = (models,) if isinstance(models, str) else tuple(models)
    if not models or not all(isinstance(m, str) and m for m in models):
        raise TypeError("control(reason, models=...): name the claim ids whose falsity the variant models")
    return pytest.mark.control(reason, models=models)


def comparator_check(reason: str):
    """Mark a test as a check of a comparator (a record compared field by field, a quote looked up in a
    document): it passes when the comparator rejects every deliberately wrong field. It shows that the
    machinery can notice a difference, not that the claim is right or wrong, so it is reported apart from
    the claim's evidence and its negative controls; a failure is an error of the evidence."""
    import pytest

    if not reason:
        raise TypeError("comparator_check(reason): say what the wrong variants are")
    return pytest.mark.comparator(reason)


def control_rejected(exc: BaseException) -> bool:
    """Whether ``exc`` is the claim's own check rejecting a variant: a :class:`ClaimViolation`, or a group
    (Hypothesis reports several distinct failures as one) of nothing but ClaimViolations."""
    if isinstance(exc, BaseExceptionGroup):
        violations, others = exc.split(ClaimViolation)
        return violations is not None and others is None
    return isinstance(exc, ClaimViolation)


class PremiseFailed(Exception):
    """A construction does not have the property it was built for: the evidence is broken, not the claim.

    Deliberately not an AssertionError, so that neither a refutation nor the plugin counts it as a
    violated claim: the test ends as ``error``."""

    def __init__(self, message: str, values: dict[str, Any] | None = None):
        detail = "".join(f"\n    {k} = {_show(_plain(v))}" for k, v in (values or {}).items())
        super().__init__("premise of the evidence failed: " + message + detail)


def premise(condition: Any, message: str, **values: Any) -> None:
    """Raise :class:`PremiseFailed` unless ``condition``: for what a construction must satisfy (the matrix
    is row-stochastic, the attention is localised, ...) before its outcome says anything about a claim."""
    if not bool(condition):
        raise PremiseFailed(message, values)


def claim_assert(condition: Any, message: str, **example: Any) -> None:
    """Raise :class:`ClaimViolation` with ``message`` and the named values unless ``condition``."""
    if not bool(condition):
        raise ClaimViolation(message, example)


# The test currently running in this process (set by the pytest plugin). Workers of
# pytest-xdist run one test at a time, so a module global is enough.
_current_item: Any = None


def _properties() -> list:
    if _current_item is None:  # called outside pytest: figures are simply not kept
        return []
    return _current_item.user_properties


def record(name: str, value: Any) -> None:
    """Attach a measured figure (number, list or dict of numbers/strings) to the running test.

    Figures are written to the per-claim results and shown in the report.
    """
    _properties().append(("claimcheck.figure", {"name": name, "value": _plain(value)}))


def refutes(reason: str | None = None) -> Callable[[Callable], Callable]:
    """Mark a test as a refutation of its claim(s).

    The decorated test states the claim as written with :func:`claim_assert`. It passes when a
    :class:`ClaimViolation` is raised (for a Hypothesis test, after shrinking: the falsifying
    example Hypothesis prints is recorded) and fails with :class:`NoCounterexample` otherwise.
    A hand-built (non-Hypothesis) counterexample must say in ``reason`` why it is minimal.
    """

    def decorate(test: Callable) -> Callable:
        searched = hasattr(test, "hypothesis")
        if not searched and not reason:
            raise TypeError(
                f"{test.__name__}: a constructed counterexample needs refutes(reason=...) "
                "saying why it is minimal"
            )

        @functools.wraps(test)
        def refutation(*args: Any, **kwargs: Any) -> None:
            try:
                test(*args, **kwargs)
            except ClaimViolation as exc:
                _record_counterexample(exc, reason, searched)
                return
            except BaseExceptionGroup as group:  # several distinct failures from Hypothesis
                violations, others = group.split(ClaimViolation)
                if others is not None or violations is None:
                    raise
                _record_counterexample(_first_leaf(violations), reason, searched)
                return
            raise NoCounterexample(
                f"{test.__name__}: expected a counterexample to the claim, found none"
                + (" after the Hypothesis search" if searched else "")
            )

        refutation.__signature__ = inspect.signature(test)  # what pytest and Hypothesis see
        refutation._claimcheck_refutation = True
        return refutation

    return decorate


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _record_counterexample(exc: ClaimViolation, reason: str | None, searched: bool) -> None:
    # Hypothesis adds the shrunk failing call as a note ("Falsifying example: ..." in older
    # releases, "Failing test case: ..." in newer ones); keep that note, not its explanations.
    notes = getattr(exc, "__notes__", [])
    falsifying = "\n".join(n for n in notes if n.startswith(("Falsifying example", "Failing test case")))
    _properties().append(
        (
            "claimcheck.counterexample",
            {
                "message": exc.message,
                "values": exc.example,
                "hypothesis": falsifying or None,
                "how": "shrunk by Hypothesis" if searched else "constructed",
                "reason": reason,
            },
        )
    )


def _plain(value: Any) -> Any:
    """Convert tensors, arrays and numpy scalars into JSON-friendly Python values."""
    if hasattr(value, "detach"):  # torch.Tensor
        value = value.detach().cpu()
        return _plain(value.item() if value.numel() == 1 else value.tolist())
    if hasattr(value, "tolist"):  # numpy array or scalar
        return _plain(value.tolist())
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, complex):
        return {"re": _plain(value.real), "im": _plain(value.imag)}
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 400 else text[:400] + " ..."
