"""SIGTERM, Ctrl-C and SIGHUP end a command cleaned up: raised in the main thread, raised again where Python
dropped it, ended by the watchdog or a second signal; once the work is complete, held until the block's
end."""

from __future__ import annotations

import signal
import sys
from types import SimpleNamespace

import pytest

from gtool import interrupts
from gtool.errors import InterruptedWhenDone, Terminated


def test_a_signal_whose_exception_was_dropped_is_raised_again_before_publishing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A flaky run exited 0 with its store after SIGTERM: Python had dropped the handler's exception."""
    monkeypatch.setattr(interrupts.threading.Thread, "start", lambda thread: None)
    with interrupts.Interrupts() as watch:
        watch.check()  # no signal: nothing
        with pytest.raises(Terminated):
            watch.handle(signal.SIGTERM, None)
        with pytest.raises(Terminated, match="terminated by SIGTERM"):
            watch.check()
    watch.received = signal.SIGINT
    with pytest.raises(KeyboardInterrupt):
        watch.check()


def test_python_s_report_of_the_dropped_signal_exception_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal that came while distributed's garbage-collector callback ran printed "Exception ignored
    in ... Traceback" on stderr (the run still ended with 143)."""

    def dropped(exc: BaseException) -> SimpleNamespace:
        return SimpleNamespace(
            exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None, object=None
        )

    reported: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: reported.append(unraisable.exc_value))
    monkeypatch.setattr(interrupts.threading.Thread, "start", lambda thread: None)
    early, late, other = Terminated("early"), Terminated("terminated by SIGTERM"), ValueError("other")
    with interrupts.Interrupts() as watch:
        sys.unraisablehook(dropped(early))  # no signal yet: reported
        with pytest.raises(Terminated):
            watch.handle(signal.SIGTERM, None)
        sys.unraisablehook(dropped(late))
        sys.unraisablehook(dropped(other))
    assert reported == [early, other]
    sys.unraisablehook(dropped(late))
    assert reported == [early, other, late]


def test_a_second_signal_or_a_run_that_does_not_unwind_is_cleaned_up_and_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first signal raises in the main thread; where Python drops that exception the watchdog (here
    called at once) or a second signal runs the cleanups, last registered first, and exits, saying why as
    an unwound run does."""
    exits, done, said = [], [], []
    monkeypatch.setattr(interrupts.os, "_exit", exits.append)
    monkeypatch.setattr(interrupts.os, "write", lambda fd, data: said.append((fd, data)))
    monkeypatch.setattr(interrupts.threading.Thread, "start", lambda thread: None)
    with interrupts.Interrupts() as watch:
        watch.on_abandon(lambda: done.append("lock"))
        watch.on_abandon(lambda: done.append("partial"))
        with pytest.raises(Terminated):
            watch.handle(signal.SIGTERM, None)
        assert done == [] and exits == []
        with pytest.raises(Terminated):  # (os._exit returned: it is a stand-in)
            watch.handle(signal.SIGTERM, None)
        assert done == ["partial", "lock"] and exits == [143] and said == [(2, b"terminated\n")]
        # the watchdog's own path ends the same way
        monkeypatch.setattr(interrupts.time, "sleep", lambda seconds: None)
        watch.abandon_later(signal.SIGINT)
        assert exits == [143, 130] and said[1:] == [(2, b"interrupted\n")]
    assert signal.getsignal(signal.SIGTERM) is not watch.handle


def test_a_signal_during_or_after_the_completing_step_is_held_until_the_work_s_end(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Deferred during the step and held after it, so that what remains (stopping the cluster, the summary)
    is not cut in the middle; the outermost block's end raises InterruptedWhenDone; the watchdog or a second
    signal exits 0 with the notice. (A SIGTERM raised inside Dask's cluster shutdown hung the program.)"""
    exits: list[int] = []
    monkeypatch.setattr(interrupts.os, "_exit", exits.append)
    monkeypatch.setattr(interrupts.threading.Thread, "start", lambda thread: None)
    remaining: list[str] = []
    held = pytest.raises(InterruptedWhenDone, match="^SIGTERM came after the store S$")
    with held, interrupts.Interrupts() as outer:
        with interrupts.Interrupts() as watch:
            with watch.completing("the store S"):
                watch.handle(signal.SIGTERM, None)  # deferred: the step goes on
                assert watch.done is None
            watch.check()  # held: nothing raised
            remaining.append("cluster stopped")
            watch.abandon(signal.SIGTERM)  # the watchdog, had it come to that
            assert exits == [0] and "notice: SIGTERM came after the store S\n" in capfd.readouterr().err
        assert (outer.done, outer.received) == ("the store S", signal.SIGTERM)
        remaining.append("summary printed")
    assert remaining == ["cluster stopped", "summary printed"]
    held = pytest.raises(InterruptedWhenDone, match="^SIGINT came after the store S$")
    with held, interrupts.Interrupts() as outer:
        with interrupts.Interrupts() as watch, watch.completing("the store S"):
            pass
        outer.handle(signal.SIGINT, None)  # once the inner block handed its work over: held too
        outer.handle(signal.SIGINT, None)  # a second signal ends the run at once
        assert exits == [0, 0]
    with pytest.raises(ValueError), interrupts.Interrupts() as failing:  # an error of its own stays
        with failing.completing("the store S"):
            failing.handle(signal.SIGTERM, None)
        raise ValueError("the summary failed")
    with interrupts.Interrupts() as early:
        with pytest.raises(Terminated):
            early.handle(signal.SIGTERM, None)
        with pytest.raises(Terminated), early.completing("the store S"):  # a signal before: as before
            raise AssertionError("the step ran after a signal")
        assert early.done is None


def test_a_hangup_ends_the_run_as_sigterm_does_unless_it_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal or SSH session closing (SIGHUP) killed a run on the spot, leaving its partial store,
    spill folder and lock; under `nohup` (SIGHUP ignored) the run goes on."""
    monkeypatch.setattr(interrupts.threading.Thread, "start", lambda thread: None)
    before = signal.getsignal(signal.SIGHUP)
    try:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        with interrupts.Interrupts() as watch:
            assert signal.getsignal(signal.SIGHUP) == watch.handle
            with pytest.raises(Terminated, match="terminated by SIGHUP") as ended:
                watch.handle(signal.SIGHUP, None)
        assert ended.value.signum == signal.SIGHUP
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_DFL
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        with interrupts.Interrupts():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
