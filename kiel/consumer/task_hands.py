"""Which records each task got from ``consume()``: its next call finishes them.

With ``auto_finish`` (the default), a :class:`~kiel.consumer.grouped.GroupedConsumer`
counts the records one ``consume()`` returned as in the calling task's hands
until that task calls again (or leaves the consumer's ``async with``, or
returns): then they are finished, and their offsets may be committed. Only
the task's own records are finished: several tasks may consume from one
consumer. A task that fails or is cancelled finishes nothing, so the next
owner of those partitions gets them again.

This is an index by task, not a store: the offsets lent are the records'
own (``OwnedPartition.pending``, hanging off each partition's record), and
each entry names the ownership it was lent from, so an ownership that ended
(revoked, lost) finishes nothing.
"""

import asyncio
import weakref
from collections.abc import Iterable
from typing import Any

from kiel.consumer.commits import Commits
from kiel.consumer.group_state import OwnedPartition
from kiel.structs import Record, TopicPartition

__all__ = ["TaskHands"]

#: Records one consume() returned to a task: (partition, its ownership, offsets).
_Lent = tuple[TopicPartition, OwnedPartition, list[int]]


class TaskHands:
    """The records each task holds from its last ``consume()``.

    Args:
        commits: where finished offsets go (it also knows each partition's
            ownership: records of an ownership that ended are not finished).
    """

    def __init__(self, commits: Commits) -> None:
        self._commits = commits
        # Weak: a task that is gone without its done callback running holds nothing.
        self._by_task: weakref.WeakKeyDictionary[asyncio.Task[Any], list[_Lent]] = (
            weakref.WeakKeyDictionary()
        )

    def lend(self, tp: TopicPartition, records: list[Record[Any, Any]]) -> None:
        """``records`` of ``tp`` went to the current task: its next call finishes them."""
        task = asyncio.current_task()
        part = self._commits.held.get(tp)
        if task is None or part is None:
            return
        mine = self._by_task.get(task)
        if mine is None:
            mine = self._by_task[task] = []
            task.add_done_callback(self._task_ended)
        mine.append((tp, part, [r.offset for r in records]))

    def finish_mine(self) -> None:
        """Finish what the current task got from its last ``consume()`` (only its own)."""
        task = asyncio.current_task()
        if task is not None:
            self._finish(self._by_task.pop(task, ()))

    def _finish(self, lent: Iterable[_Lent]) -> None:
        commits = self._commits
        for tp, part, offsets in lent:
            if commits.held.get(tp) is part:  # still the same ownership
                for offset in offsets:
                    commits.finish(tp, offset)

    def _task_ended(self, task: "asyncio.Task[Any]") -> None:
        # A task that returned is done with what it got; one that failed or
        # was cancelled may not have handled it: the next owner redelivers.
        lent = self._by_task.pop(task, ())
        if not task.cancelled() and task.exception() is None:
            self._finish(lent)
            return
        commits = self._commits
        for tp, part, offsets in lent:
            if commits.held.get(tp) is part:
                commits.abandon(tp, offsets)
