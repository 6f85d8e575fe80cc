"""Seeded randomness, the synthetic clock and ids: the only place any of them is defined.

Everything here is a pure function of a job seed (seed 004 D1: an integer, written in base 10,
or a non-empty string, as UTF-8) and explicit counters, built on SHA-256 and HMAC-SHA256 only.
No wall clock, no ``random`` module, no uuid4, no ``os.urandom``: replaying a job with the same
seed reproduces every draw, timestamp and id in any process and any Python version.

Messages are fields joined with ``":"``:

- Seed 000 section 5 fixes the id formulas exactly (``sha256(job_seed:sequence_index:event_type)``
  and friends). They are reproduced as written, even though a seed or event type that itself
  contains ``":"`` could make two different triples hash the same text.
- `derive_id` (seed 004 D3) signs ``namespace:payload:counter`` with the seed as HMAC key. The
  namespace must match ``[a-z0-9_]+`` and the counter is a base-10 integer, so neither holds a
  ``":"``: the namespace ends at the first separator, the counter starts after the last, and the
  payload (which may contain ``":"``) is what lies between. The message is therefore unambiguous.
- The RNG (``rng:<stream>:<block>``) and the clock (``clock:epoch``, ``clock:<counter>``) share the
  seed key, so `derive_id` refuses the namespaces ``rng`` and ``clock``: an id can never equal a
  random block or a clock input.
"""

import hmac
import re
from collections.abc import MutableSequence, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final, TypeAlias, TypeVar

from domain.canonical import sha256_hex
from domain.errors import InvalidInput

Seed: TypeAlias = int | str

_T = TypeVar("_T")

_NAMESPACE: Final = re.compile(r"[a-z0-9_]+")
_RESERVED_NAMESPACES: Final = frozenset({"rng", "clock"})
_BLOCK_BITS: Final = 256
_CLOCK_ORIGIN: Final = datetime(2020, 1, 1, tzinfo=UTC)
_CLOCK_SPAN_SECONDS: Final = 10 * 365 * 24 * 60 * 60  # "ten years": 3650 days, leap days ignored
_MICROSECONDS_PER_SECOND: Final = 1_000_000

ID_GENERATORS: Final[dict[str, str]] = {
    "event_id": "sha256(job_seed:sequence_index:event_type)",
    "snapshot_id": "sha256(config_hash:schema_version:seed_namespace)",
    "wm_id": "sha256(job_seed:wm_counter)",
    "episodic_id": "sha256(job_seed:episodic_counter)",
    "derive_id": "hmac_sha256(key=seed, msg=namespace:payload:counter)",
}
"""Each id generator and its formula, for snapshot metadata (seed 000 section 5)."""


def seed_bytes(seed: Seed) -> bytes:
    """The seed as key material: an int in base 10, a string as UTF-8 (seed 004 D1).

    ``bool`` is refused although it is an ``int``: ``True`` as a seed is a bug, not ``"1"``.
    """
    return _seed_text(seed).encode("utf-8")


def event_id(job_seed: Seed, sequence_index: int, event_type: str) -> str:
    """``sha256(job_seed:sequence_index:event_type)`` (seed 000 section 5)."""
    seed = _seed_text(job_seed)
    index = _counter("sequence_index", sequence_index)
    return sha256_hex(f"{seed}:{index}:{event_type}".encode())


def snapshot_id(config_hash: str, schema_version: int | str, seed_namespace: str) -> str:
    """``sha256(config_hash:schema_version:seed_namespace)`` (seed 000 section 5)."""
    version = _field("schema_version", schema_version)
    return sha256_hex(f"{config_hash}:{version}:{seed_namespace}".encode())


def wm_id(job_seed: Seed, wm_counter: int) -> str:
    """``sha256(job_seed:wm_counter)`` (seed 000 section 5)."""
    seed = _seed_text(job_seed)
    return sha256_hex(f"{seed}:{_counter('wm_counter', wm_counter)}".encode())


def episodic_id(job_seed: Seed, episodic_counter: int) -> str:
    """``sha256(job_seed:episodic_counter)`` (seed 000 section 5).

    The formula is the same as `wm_id`'s, so the two only differ through their counters.
    """
    seed = _seed_text(job_seed)
    return sha256_hex(f"{seed}:{_counter('episodic_counter', episodic_counter)}".encode())


def derive_id(seed: Seed, namespace: str, payload: str, counter: int) -> str:
    """Hex ``HMAC_SHA256(seed, namespace:payload:counter)`` (seed 004 D3)."""
    if _NAMESPACE.fullmatch(namespace) is None:
        msg = f"namespace must match [a-z0-9_]+, got {namespace!r}"
        raise InvalidInput(msg)
    if namespace in _RESERVED_NAMESPACES:
        msg = f"namespace {namespace!r} is reserved for the RNG and the clock"
        raise InvalidInput(msg)
    message = f"{namespace}:{payload}:{_counter('counter', counter)}"
    return hmac.digest(seed_bytes(seed), message.encode("utf-8"), "sha256").hex()


class DeterministicRNG:
    """Counter-mode HMAC-SHA256 generator: block ``n`` is ``HMAC(seed, "rng:<stream>:<n>")``.

    Unlike ``random.Random`` its output is specified by this docstring alone, so it is identical
    across processes and Python versions. Every call takes whole 32-byte blocks, which makes
    `draws` an exact record of where the generator stands. Streams give independent sequences
    from the same seed.
    """

    def __init__(self, job_seed: Seed, stream: str = "main", *, start: int = 0) -> None:
        """``start`` resumes the stream after that many blocks (a reducer keeps it in its state)."""
        self._key = seed_bytes(job_seed)
        self._prefix = f"rng:{stream}:".encode()
        self._draws = int(_counter("start", start))

    @property
    def draws(self) -> int:
        """How many 32-byte blocks have been consumed so far."""
        return self._draws

    def randbits(self, k: int) -> int:
        """A uniform ``k``-bit integer: the top ``k`` bits of the next ``ceil(k/256)`` blocks."""
        if k < 0:
            msg = f"number of bits must be non-negative, got {k}"
            raise InvalidInput(msg)
        blocks = -(-k // _BLOCK_BITS)
        value = 0
        for _ in range(blocks):
            message = self._prefix + str(self._draws).encode("ascii")
            self._draws += 1
            block = hmac.digest(self._key, message, "sha256")
            value = (value << _BLOCK_BITS) | int.from_bytes(block, "big")
        return value >> (blocks * _BLOCK_BITS - k)

    def random(self) -> float:
        """A float in [0, 1) with 53 random bits, every value exactly representable."""
        return self.randbits(53) / (1 << 53)

    def randint(self, a: int, b: int) -> int:
        """A uniform integer in [a, b], without modulo bias: out-of-range draws are rejected."""
        if a > b:
            msg = f"empty range: randint({a}, {b})"
            raise InvalidInput(msg)
        size = b - a + 1
        bits = (size - 1).bit_length()
        while True:
            candidate = self.randbits(bits)
            if candidate < size:
                return a + candidate

    def choice(self, seq: Sequence[_T]) -> _T:
        """A uniformly chosen element of a non-empty sequence."""
        if not seq:
            msg = "cannot choose from an empty sequence"
            raise IndexError(msg)
        return seq[self.randint(0, len(seq) - 1)]

    def shuffle(self, items: MutableSequence[_T]) -> None:
        """Shuffle in place (Fisher-Yates, from the last position down)."""
        for i in range(len(items) - 1, 0, -1):
            j = self.randint(0, i)
            items[i], items[j] = items[j], items[i]


class DeterministicClock:
    """Synthetic UTC time: ``at(c) = base + c s + (HMAC(seed, "clock:<c>") mod 10**6) µs``.

    ``base`` is 2020-01-01T00:00:00Z plus ``HMAC(seed, "clock:epoch") mod (3650 days)`` seconds
    (HMAC read as a big-endian integer). Each step adds one second and a jitter below one
    second, so ``at`` is strictly increasing in the counter (by at least one microsecond), which
    is what ordering rules such as SEM conflict resolution (seed 004 F2) need. The instant is
    synthetic: it orders events and reproduces on replay; it never claims wall-clock truth.
    """

    def __init__(self, seed: Seed) -> None:
        self._key = seed_bytes(seed)
        offset = self._hmac_int(b"clock:epoch") % _CLOCK_SPAN_SECONDS
        self._base = _CLOCK_ORIGIN + timedelta(seconds=offset)

    def at(self, counter: int) -> datetime:
        """The timezone-aware UTC instant of tick ``counter`` (``counter >= 0``)."""
        tick = _counter("counter", counter)
        jitter = self._hmac_int(f"clock:{tick}".encode("ascii")) % _MICROSECONDS_PER_SECOND
        return self._base + timedelta(seconds=counter, microseconds=jitter)

    def iso(self, counter: int) -> str:
        """`at` as ISO-8601 UTC, ``YYYY-MM-DDTHH:MM:SS.ffffffZ``, always with microseconds."""
        return iso_text(self.at(counter))

    def _hmac_int(self, message: bytes) -> int:
        return int.from_bytes(hmac.digest(self._key, message, "sha256"), "big")


AGENT_RNG_STREAM: Final = "agent"
"""The RNG stream an outside agent draws from (`RunRecorder.rng`, the re-execution harness's
`rng`): the job's seeded RNG, a stream apart from those the ledger's reducers draw from."""


class TickingClock:
    """The job's deterministic clock as an agent reads it: each `now` is the next tick
    (`DeterministicClock.at(0)`, ``at(1)``, ...), so code that reads it in the same order while
    recording and while re-executed reads the same instants."""

    def __init__(self, seed: Seed) -> None:
        self._clock = DeterministicClock(seed)
        self._ticks = 0

    @property
    def ticks(self) -> int:
        """How many instants have been read so far."""
        return self._ticks

    def now(self) -> datetime:
        instant = self._clock.at(self._ticks)
        self._ticks += 1
        return instant


def iso_text(instant: datetime) -> str:
    """A UTC instant as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``: how every MACE timestamp is written."""
    return instant.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _seed_text(seed: Seed) -> str:
    text = _field("seed", seed)
    if not text:
        msg = "seed must not be an empty string"
        raise InvalidInput(msg)
    return text


def _field(name: str, value: int | str) -> str:
    """Render an int or str id field as text; ints in base 10, ``bool`` refused."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        msg = f"{name} must be an int or a str, got {type(value).__name__}"
        raise TypeError(msg)
    return int.__repr__(value) if isinstance(value, int) else str.__str__(value)


def _counter(name: str, value: int) -> str:
    """Render a counter in base 10; counters are non-negative ints, ``bool`` refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{name} must be an int, got {type(value).__name__}"
        raise TypeError(msg)
    if value < 0:
        msg = f"{name} must be non-negative, got {value}"
        raise InvalidInput(msg)
    return int.__repr__(value)
