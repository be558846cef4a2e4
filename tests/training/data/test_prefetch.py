import threading
import time
from collections.abc import Iterator

import pytest

from tests.waiting import wait_until
from training.data.prefetch import prefetched


def _counting(items: int, produced: list[int]) -> Iterator[int]:
    for item in range(items):
        produced.append(item)
        yield item


def test_items_arrive_in_order_and_the_thread_ends() -> None:
    stop = threading.Event()
    assert list(prefetched(iter(range(100)), 3, stop, "test-prefetch")) == list(range(100))
    assert stop.is_set()
    assert not any(thread.name == "test-prefetch" for thread in threading.enumerate())


def test_the_producer_runs_at_most_capacity_items_ahead() -> None:
    produced: list[int] = []
    iterator = prefetched(_counting(1000, produced), 4, threading.Event(), "test-prefetch")
    assert next(iterator) == 0
    # 1 taken, 4 waiting, 1 built and blocked on the full buffer: it gets there however slowly the thread runs,
    wait_until(lambda: len(produced) >= 6, "the producer to fill the buffer", poll_s=0.01)
    time.sleep(0.3)  # and, given room to run further, goes no further
    assert len(produced) == 6
    iterator.close()
    assert len(produced) == 6


def test_an_error_arrives_after_the_items_before_it() -> None:
    def failing() -> Iterator[int]:
        yield 1
        yield 2
        raise OSError("disk went away")

    iterator = prefetched(failing(), 8, threading.Event(), "test-prefetch")
    assert next(iterator) == 1
    assert next(iterator) == 2
    with pytest.raises(OSError, match="disk went away"):
        next(iterator)


def test_setting_stop_ends_the_consumer_and_the_producer() -> None:
    stop = threading.Event()
    iterator = prefetched(iter(range(10**9)), 2, stop, "test-prefetch")
    next(iterator)
    stop.set()
    assert list(iterator) == []  # nothing more, not even what was buffered
    assert not any(thread.name == "test-prefetch" for thread in threading.enumerate())


def test_capacity_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match=r"capacity: 0 must be an integer >= 1"):
        next(prefetched(iter([1]), 0, threading.Event(), "test-prefetch"))
