"""Bearer tokens as the store last said, for a fraction of a second (`VerifiedTokens`).

Without it every authenticated request costs a SELECT (a lookup's largest part on PostgreSQL).
A token's row is remembered for ``ttl_s`` (``TUNEHUB_TOKEN_CACHE_S``, default 0.5 s) after it
was read, so a client sending hundreds of requests a second costs the store at most a couple of
reads a second per replica. What that may delay is bounded by ``ttl_s``: a revocation (written
by `tunehub token revoke`, in another process) is seen by every replica at most ``ttl_s``
after it commits, with no message to lose. Expiry is not delayed: the cached row's state is
computed at each use. Unknown texts are not remembered (a client spraying random tokens cannot
fill the memory), and at most `MAX_ENTRIES` rows are kept. ``ttl_s`` 0 turns the cache off.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from schedules_db.tokens import TokenInfo, TokenStore, hash_token

MAX_ENTRIES = 10_000


class VerifiedTokens:
    """`TokenStore.find` through a per-process cache of found rows (see the module docstring).
    Thread-safe: the API's threadpool and event loop share it."""

    def __init__(
        self,
        tokens: TokenStore,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tokens, self.ttl_s, self._clock = tokens, ttl_s, clock
        self._lock = threading.Lock()
        self._rows: OrderedDict[str, tuple[float, TokenInfo]] = OrderedDict()  # sha -> (at, row)

    def cached(self, text: str) -> TokenInfo | None:
        """The row of ``text`` if it was read less than ``ttl_s`` ago (no I/O), else None."""
        if self.ttl_s <= 0:
            return None
        key = hash_token(text)
        with self._lock:
            found = self._rows.get(key)
            if found is None:
                return None
            if self._clock() - found[0] >= self.ttl_s:
                del self._rows[key]
                return None
            return found[1]

    def find(self, text: str) -> TokenInfo | None:
        """The token whose text this is, in any state (None if there is none): the cached row,
        or the store's, remembered."""
        row = self.cached(text)
        if row is not None:
            return row
        read_at = self._clock()  # before the read: a row never outlives ttl_s from its SELECT
        row = self.tokens.find(text)
        if row is not None and self.ttl_s > 0:
            with self._lock:
                self._rows[hash_token(text)] = (read_at, row)
                if len(self._rows) > MAX_ENTRIES:
                    self._rows.popitem(last=False)  # the oldest read goes first
        return row
