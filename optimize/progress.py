"""Progress hooks for a front end: the compile stages and the evaluation report through a
:class:`Reporter`; the command line draws the events as rich progress bars. The default does nothing."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


class Reporter:
    """Progress events of a long run. Subclass and override what a front end shows."""

    def stage(self, description: str, total: int | None = None) -> None:  # a new bar
        pass

    def describe(self, description: str) -> None:  # a new description for the current bar
        pass

    def advance(self, n: int = 1) -> None:
        pass

    def done(self) -> None:  # the current bar is finished
        pass

    def log(self, message: str) -> None:
        logger.info(message)
