"""Retrying provider calls: exponential backoff with full jitter, honouring retry-after."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from .errors import ProviderError

__all__ = ["RetryPolicy"]

T = TypeVar("T")


@dataclass
class RetryPolicy:
    """How often and how long to wait: attempt n waits a random time up to
    `base_delay * 2**n` (at most `max_delay`), or what the server's retry-after says.

    A server that asks for more than `max_delay` is not waited for: the call fails at once with
    the server's error, saying how long it asked for. `sleep` is injectable (tests, clocks).
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, error: ProviderError) -> float:
        """Seconds to wait before retry number `attempt` (0-based)."""
        if error.retry_after is not None:
            return min(error.retry_after, self.max_delay)
        return self.rng.uniform(0, min(self.max_delay, self.base_delay * 2**attempt))

    async def run(
        self, call: Callable[[], Awaitable[T]], classify: Callable[[BaseException], ProviderError]
    ) -> T:
        """`call()`, retried while its failures are retryable and attempts are left."""
        attempt = 0
        while True:
            try:
                return await call()
            except Exception as raw:
                error = classify(raw)
                if error.retryable and error.retry_after is not None:
                    if error.retry_after > self.max_delay:
                        raise _too_long(error, self.max_delay) from None
                if not error.retryable or attempt >= self.max_retries:
                    if error is raw:
                        raise
                    raise error from None
                await self.sleep(self.delay(attempt, error))
                attempt += 1


def _too_long(error: ProviderError, max_delay: float) -> ProviderError:
    asked = error.retry_after
    message = (
        f"{error} The server asked to wait {asked:g} s before retrying, longer than "
        f"RetryPolicy.max_delay={max_delay:g} s: not retried. Try again later, or raise "
        "max_delay to wait that long."
    )
    return type(error)(message, status=error.status, retry_after=asked)
