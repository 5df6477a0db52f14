"""Ctrl-C during a run of several ranks: the ranks agree on it before each case, and one that lands while they
agree still counts (CI saw a run of two ranks go on to its end after "stopping after this case")."""

import os
import signal
from gpubench.run.interrupt import StopFlag
from gpubench.run.layouts import Ranks


class _Group:
    """A world of one whose agreement is interrupted: the SIGINT arrives after the flag was sent."""

    def __init__(self):
        self.calls = 0

    def step(self, label):
        pass

    def any(self, flag: bool) -> bool:
        self.calls += 1
        if self.calls == 1:
            os.kill(os.getpid(), signal.SIGINT)  # Python runs the handler before this call returns
        return flag


def test_a_ctrl_c_during_the_ranks_agreement_stops_them_at_the_next_case():
    group = _Group()
    ranks = Ranks(group)
    with StopFlag() as stop:
        ranks.step(stop, "case 1")
        assert stop.asked and not stop.set  # the answer sent before the Ctrl-C: this case goes on, everywhere alike
        ranks.step(stop, "case 2")
        assert stop.set  # the next agreement carries it


def test_a_second_ctrl_c_stops_at_once_even_after_an_agreement_cleared_the_flag():
    with StopFlag() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        stop.set = False  # what an agreement whose answer predates the Ctrl-C writes
        try:
            os.kill(os.getpid(), signal.SIGINT)
        except KeyboardInterrupt:
            pass
        else:
            raise AssertionError("the second Ctrl-C did not stop at once")
