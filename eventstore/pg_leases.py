"""Who drives a run in a PostgreSQL log: claims (one run, or the next that can go on), the
leases this process renews on a thread of its own, and their release."""

from __future__ import annotations

import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence

from .driver import CLAIM_ORDER, Driver, refuse_live_driver
from .errors import LeaseLost, StoreError, UnknownRun
from .fencing import Tokens, lost_lease
from .pg_connections import Conn, Connections

__all__ = ["CLAIMABLE", "Leases"]

CLAIMABLE = {
    "queued": "(status = 'queued' AND {free})",
    "ready": "(status = 'ready' AND {free})",
    "orphaned": "(status = 'running' AND (driver_token IS NULL OR lease_until < %(now)s))",
}
"""What `claim_next` may take, by kind: a queued or ready run no live lease holds, and a running
run with no live lease (its driver's ran out, or it released the run after a store error)."""

_FREE = "(driver_token IS NULL OR lease_until IS NULL OR lease_until < %(now)s)"
_TAKE = (
    "UPDATE runs SET driver_host = %s, driver_pid = %s, driver_started = %s, driver_token = %s, "
    "lease_until = %s WHERE run_id = %s"
)
TAKEN = "driver_host, driver_pid, driver_started, driver_token, lease_until"
"""The catalog columns a claim sets, in the order of `Leases.taken`'s values."""


class Leases:
    """The runs one store drives, by lease token; `unknown(run_id)` makes the error for a run
    that is not in the catalog."""

    def __init__(self, db: Connections, lease: float, unknown: Callable[[str], UnknownRun]) -> None:
        self.lease = lease
        self._db = db
        self._unknown = unknown
        self.tokens = Tokens()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._renewer: threading.Thread | None = None

    def taken(self) -> tuple[list[object], str]:
        """The values of `TAKEN` for a new claim by this process, and its token (held once the
        claim is committed: `hold`)."""
        me = Driver.current()
        token = uuid.uuid4().hex
        return [me.host, me.pid, me.started, token, time.time() + self.lease], token

    def refused(self, conn: Conn, run_id: str, token: str | None) -> LeaseLost | None:
        """Why a write carrying `token` moved nothing: the run is unknown (raised), another
        driver has it (the run is fenced; the `LeaseLost` returned), or neither (None)."""
        row = conn.execute(
            "SELECT driver_token, driver_host, driver_pid FROM runs WHERE run_id = %s", (run_id,)
        ).fetchone()
        if row is None:
            raise self._unknown(run_id)
        if token is None or row[0] == token:
            return None
        holder = str(Driver(row[1], row[2])) if row[0] else "no process"
        return self.tokens.lose(run_id, lost_lease(run_id, holder))

    def claim(self, run_id: str, *, force: bool) -> None:
        """See `PostgresEventStore.claim`."""
        me = Driver.current()
        token = uuid.uuid4().hex
        taken = self._db.execute(  # a run nobody drives: taken in one statement
            f"claim run {run_id!r}",
            (_TAKE + " AND driver_token IS NULL").encode(),
            (me.host, me.pid, me.started, token, time.time() + self.lease, run_id),
        )
        if taken:
            self.hold(run_id, token)
            return

        def take(conn: Conn) -> None:
            row = conn.execute(
                "SELECT driver_token, driver_host, driver_pid, driver_started, lease_until "
                "FROM runs WHERE run_id = %s FOR UPDATE",
                (run_id,),
            ).fetchone()
            if row is None:
                raise self._unknown(run_id)
            now = time.time()
            refuse_live_driver(run_id, row, self.tokens.get(run_id), force=force, now=now)
            conn.execute(_TAKE, (me.host, me.pid, me.started, token, now + self.lease, run_id))

        self._db.transact(f"claim run {run_id!r}", take)
        self.hold(run_id, token)

    def claim_next(
        self, kinds: Sequence[str]
    ) -> tuple[str, tuple[Driver, float | None] | None] | None:
        """See `PostgresEventStore.claim_next`: the id of the run claimed and the driver it was
        taken from with its lease's end (if any), or None."""
        unknown = [k for k in kinds if k not in CLAIMABLE]
        if unknown:
            raise StoreError(
                f"claim_next(kinds=...) got {', '.join(map(repr, unknown))}; the kinds are "
                f"{', '.join(map(repr, CLAIMABLE))}."
            )
        if not kinds:
            return None
        where = " OR ".join(CLAIMABLE[k].format(free=_FREE) for k in dict.fromkeys(kinds))
        me = Driver.current()
        token = uuid.uuid4().hex
        now = time.time()

        def take(conn: Conn) -> tuple[str, tuple[Driver, float | None] | None] | None:
            row = conn.execute(
                "SELECT run_id, driver_host, driver_pid, driver_started, lease_until FROM runs "
                f"WHERE {where} ORDER BY {CLAIM_ORDER} LIMIT 1 FOR UPDATE SKIP LOCKED".encode(),
                {"now": now},
            ).fetchone()
            if row is None:
                return None
            conn.execute(_TAKE, (me.host, me.pid, me.started, token, now + self.lease, row[0]))
            previous = (Driver(row[1], row[2], row[3] or ""), row[4]) if row[1] else None
            return str(row[0]), previous

        taken = self._db.transact("claim the next run", take)
        if taken is not None:
            self.hold(taken[0], token)
        return taken

    def hold(self, run_id: str, token: str) -> None:
        """A claim of this store's was committed: keep its lease renewed."""
        self.tokens.hold(run_id, token)
        with self._lock:
            if self._renewer is None:
                self._renewer = threading.Thread(
                    target=_renew_leases,
                    args=(weakref.ref(self), self._closing, self.lease / 3),
                    name=f"lease renewer of {self._db.url}",
                    daemon=True,
                )
                self._renewer.start()

    def release(self, run_id: str) -> None:
        """See `PostgresEventStore.release`."""
        token = self.tokens.hand_back(run_id)
        if token is not None:
            self._db.execute(
                f"release run {run_id!r}",
                b"UPDATE runs SET driver_host = NULL, driver_pid = NULL, driver_started = NULL, "
                b"driver_token = NULL, lease_until = NULL WHERE run_id = %s AND driver_token = %s",
                (run_id, token),
            )

    def renew(self) -> None:
        """Extend the leases of the runs this store drives."""
        for run_id, token in self.tokens.held():

            def renew(conn: Conn, run_id: str = run_id, token: str = token) -> None:
                renewed = conn.execute(
                    b"UPDATE runs SET lease_until = %s WHERE run_id = %s AND driver_token = %s",
                    (time.time() + self.lease, run_id, token),
                ).rowcount
                if not renewed and self.tokens.get(run_id) == token:  # ours, we thought
                    self.refused(conn, run_id, token)

            try:
                self._db.transact(f"renew the lease of run {run_id!r}", renew, retry=False)
            except StoreError:
                pass  # a lost run is fenced now; a failure is tried again at the next round

    def close(self) -> None:
        """Stop renewing (the leases run out unless released)."""
        self._closing.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join()


def _renew_leases(ref: weakref.ref[Leases], closing: threading.Event, period: float) -> None:
    """The renewer thread: renews the leases every `period` seconds until the store is closed
    or gone (it holds them weakly, so as not to keep them alive)."""
    while not closing.wait(period):
        leases = ref()
        if leases is None:
            return
        leases.renew()
        del leases
