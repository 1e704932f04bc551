"""The room's runs in turn (toylab_app/turns.py): at most TURNS at once, the others served in the order they came, each
told how many presses are ahead of it, a place kept across its session's reruns and given up when stale. No
timing is asserted: the threads are held and released by events, and the line is read while they wait."""

import threading
import time

import pytest

from toylab_app import turns


def wait_until(condition):
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, "the line never reached the state the test waits for"
        time.sleep(0.005)


class Run(threading.Thread):
    """A session's run: takes a turn with its ticket, notes when it was served, and works until released."""

    def __init__(self, name, order, ticket=None):
        super().__init__(name=name)
        self.ticket, self.order, self.release = ticket or turns.Ticket(), order, threading.Event()
        self.told, self.served = [], False

    def run(self):
        with turns.turn(self.ticket, waiting=self.told.append, served=lambda: setattr(self, "served", True)):
            self.order.append(self.name)
            self.release.wait(30)


@pytest.fixture(autouse=True)
def empty_line():
    assert turns.line() == (0, 0)
    yield
    wait_until(lambda: turns.line() == (0, 0))


def test_at_most_the_turns_work_and_the_others_are_served_in_the_order_they_came(monkeypatch):
    monkeypatch.setattr(turns, "CHECK_S", 0.01)
    order = []
    working = [Run(f"working {i}", order) for i in range(turns.TURNS)]
    for run in working:
        run.start()
    wait_until(lambda: turns.line() == (turns.TURNS, 0))
    waiting = []
    for index in range(3):                              # one after another: each is in the line before the next
        run = Run(f"waiting {index}", order)
        run.start()
        waiting.append(run)
        wait_until(lambda run=run, index=index: turns.line() == (turns.TURNS, index + 1) and run.told)
    assert [run.told[0] for run in waiting] == [turns.TURNS + index for index in range(3)]
    for run in working + waiting:
        run.release.set()
        run.join(30)
    assert order == [run.name for run in working + waiting]
    assert all(run.served for run in waiting) and not any(run.served or run.told for run in working)


class Rerun(BaseException):
    """Like Streamlit's RerunException: raised at a Streamlit call when the user presses again."""


def test_a_run_stopped_while_waiting_keeps_its_sessions_place_and_a_stale_place_is_given_up(monkeypatch):
    monkeypatch.setattr(turns, "CHECK_S", 0.01)
    order = []
    working = [Run(f"working {i}", order) for i in range(turns.TURNS)]
    for run in working:
        run.start()
    wait_until(lambda: turns.line() == (turns.TURNS, 0))
    first, closed = turns.Ticket(), turns.Ticket()
    with turns._changed:                                 # a closed page's place, first in line, last checked long ago
        turns._places[closed] = time.monotonic() - 10 * turns.STALE_S

    def stopped():
        raise Rerun

    with pytest.raises(Rerun):                           # the session's run is stopped while it waits: place kept
        with turns.turn(first, waiting=lambda ahead: stopped(), served=lambda: None):
            pass
    later = Run("later", order)
    later.start()
    wait_until(lambda: turns.line() == (turns.TURNS, 2) and later.told)       # the closed page's place is given up
    again = Run("the same session's next run", order, ticket=first)
    again.start()
    wait_until(lambda: again.told)
    assert again.told[0] == turns.TURNS and later.told[-1] == turns.TURNS + 1     # first in line, as before
    for run in working:
        run.release.set()
    again.release.set()
    later.release.set()
    for run in (*working, again, later):
        run.join(30)
    assert order[-2:] == ["the same session's next run", "later"] and closed not in turns._places


def test_an_error_while_waiting_gives_the_place_up():
    order = []
    working = [Run(f"working {i}", order) for i in range(turns.TURNS)]
    for run in working:
        run.start()
    wait_until(lambda: turns.line() == (turns.TURNS, 0))

    def broken(ahead):
        raise ValueError("the notice could not be shown")

    with pytest.raises(ValueError):
        with turns.turn(turns.Ticket(), waiting=broken, served=lambda: None):
            pass
    assert turns.line() == (turns.TURNS, 0)
    for run in working:
        run.release.set()
        run.join(30)


def test_the_notice_says_how_many_are_ahead():
    assert turns.notice(1).startswith("Waiting: 1 press ahead of yours.")
    assert turns.notice(12).startswith("Waiting: 12 presses ahead of yours.")
