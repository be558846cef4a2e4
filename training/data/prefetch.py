"""Run an iterator in a background thread, up to `capacity` items ahead of the consumer.

Waking a blocked thread costs tens of microseconds on a busy machine, as much as building a whole batch, so
neither side is woken per item: a consumer that finds the buffer empty sleeps until the producer has filled it
(or finished), and a producer that finds it full sleeps until the consumer has taken half of it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Generator, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")
# How often a sleeping side looks at the stop event, which is set without notifying the buffer.
POLL_SECONDS = 0.1


class _Buffer(Generic[T]):
    def __init__(self, capacity: int, stop: threading.Event) -> None:
        self._items: deque[T] = deque()
        self._capacity = capacity
        self._refill_at = capacity // 2
        self._ready = threading.Condition()
        self._stop = stop
        self._finished = False
        self._error: BaseException | None = None

    def fill(self, items: Iterator[T]) -> None:
        """The producer thread: put every item, then mark the end (or the error, raised in the consumer)."""
        try:
            for item in items:
                if not self._put(item):
                    return
            self._finish(None)
        except BaseException as error:  # handed to the consumer, which re-raises it
            self._finish(error)

    def _put(self, item: T) -> bool:
        """False when the consumer went away."""
        with self._ready:
            while len(self._items) >= self._capacity:
                if self._stop.is_set():
                    return False
                self._ready.wait(POLL_SECONDS)
            self._items.append(item)
            if len(self._items) >= self._capacity:
                self._ready.notify()
        return not self._stop.is_set()

    def _finish(self, error: BaseException | None) -> None:
        with self._ready:
            self._finished, self._error = True, error
            self._ready.notify()

    def drain(self) -> Iterator[T]:
        """The consumer: items in order until the producer finishes or the stop event is set."""
        while True:
            with self._ready:
                while not self._items or self._stop.is_set():
                    if self._stop.is_set():
                        return
                    if self._finished:
                        if self._error is not None:
                            raise self._error
                        return
                    self._ready.wait(POLL_SECONDS)
                item = self._items.popleft()
                if len(self._items) == self._refill_at:
                    self._ready.notify()
            yield item


def prefetched(items: Iterator[T], capacity: int, stop: threading.Event, thread_name: str) -> Generator[T, None, None]:
    """`items`, computed by a daemon thread at most `capacity` ahead; closing this generator stops the thread."""
    if capacity < 1:
        raise ValueError(f"capacity: {capacity!r} must be an integer >= 1")
    buffer: _Buffer[T] = _Buffer(capacity, stop)
    worker = threading.Thread(target=buffer.fill, args=(items,), name=thread_name, daemon=True)
    worker.start()
    try:
        yield from buffer.drain()
    finally:
        stop.set()
        worker.join()
