"""Adaptive K-pad (configuration method ``kpadauto``): the rule that picks each decode step's draft length.

Fixed K-pad pads every draft to one K. ``kpadauto`` pads (or cuts) every draft of a decode step to one length L
from a small set (for example 0, 2, 4, 8, 12; K_max = the largest), chosen per step to maximize expected
output tokens per second of step time; a FULL cudagraph is captured for every length (see ``__init__``), so
the step still replays one. L = 0 is a plain one-token decode step, as van's.

The rule (this module; no vLLM needed):

    tokens(L) = sum over the step's requests r of  1 + sum_{i < min(L, len_r)} p_i
    cost(L)   = O + F(L, n)
    L*        = argmax_L  tokens(L) / cost(L)      over the lengths up to the one covering the longest draft

where ``len_r`` is request r's real draft length (suffix decoding's proposal after vLLM's checks), ``p_i``
the probability that a real draft token at position i is accepted (accepted drafts are a prefix, so this is
the chance that the first i + 1 draft tokens all are; estimated from the run's own verified steps,
:class:`AcceptanceByPosition`), ``F(L, n)`` the forward time of a uniform step of n requests at length L
measured at server start (:class:`StepCosts`) and ``O`` the rest of a step (scheduling, sampling, the
suffix proposer), measured online as step time minus F. This is the expected-speed rule of speculative
decoding (Leviathan et al. 2023, section 3.5: expected tokens per step over step cost), with the acceptance
taken by draft position instead of a constant rate.

Unobserved positions take the estimate of the position before (an optimistic prior: never-tried lengths
look as good as the last tried one until measured), and every ``explore_every``-th step takes the next
longer length than L* (up to the covering one), so a length once dropped is measured again.

Unpadded steps (``KPAD_AUTO_UNPADDED=1``, :func:`choose_step`): the step may also run as vLLM runs suffix decoding
unpadded, every request with its own real draft (a non-uniform batch: vLLM's PIECEWISE graphs). Its expected tokens
are those of the uncut drafts; its cost ``U(v)``, with v the tokens the step verifies (requests + real draft
tokens), is learned online from the unpadded steps the run executes (:class:`UnpaddedCosts`); until one has been
timed, every exploration step runs unpadded; after that, every other exploration step runs unpadded and the others
run the next longer padded length than L* (L* itself when it covers every draft), whichever mode the estimates
favour, so neither mode's cost goes stale while the other is chosen. Outside exploration the step runs unpadded
when ``tokens / U(v)`` beats the best padded length's ``tokens(L*) / cost(L*)``.

Skipping speculation (:func:`no_draft_pays`): when L* = 0 even if every request had a full draft of K_max
tokens, it is 0 for every draft suffix decoding could propose to the same requests, so the next step's
proposals are not needed;
the plugin then skips the suffix tree lookups (``SuffixDecodingCache.speculate``) of that step, unless it is an
exploration step, and holds its tree updates back until the next step that looks up, which appends them in
vLLM's order first (so its drafts are those of vLLM's eager updates).
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

ENV_LENGTHS = "KPAD_AUTO_LENGTHS"
ENV_EXPLORE = "KPAD_AUTO_EXPLORE_EVERY"
ENV_COST_REPEATS = "KPAD_AUTO_COST_REPEATS"
ENV_SKIP = "KPAD_AUTO_SKIP_SPECULATION"
ENV_CHECK_DEFERRED = "KPAD_AUTO_CHECK_DEFERRED"
ENV_STEP_COSTS = "KPAD_AUTO_STEP_COSTS"
ENV_UNPADDED = "KPAD_AUTO_UNPADDED"
#: the refusal of the deferred-update check with the skip off (config entry and plugin start)
CHECK_WITHOUT_SKIP = (
    f"{ENV_CHECK_DEFERRED}=1 checks the tree updates that skipped steps defer, and {ENV_SKIP}=0 skips none: "
    "drop one of them"
)
DEFAULT_EXPLORE_EVERY = 64
DEFAULT_COST_REPEATS = 3
DEFAULT_SKIP = 1  # KPAD_AUTO_SKIP_SPECULATION: 1 = skip the lookups of steps whose drafts cannot pay
DEFAULT_UNPADDED = 0  # KPAD_AUTO_UNPADDED: 1 = a step may also run unpadded (real draft lengths, PIECEWISE)
#: choose_step's value for a step run unpadded: every request keeps its own real draft, nothing padded or cut
UNPADDED = -1
PRIOR_WEIGHT = 1.0  # pseudo-observations of the prior at each position


def _is_integer(text: str) -> bool:
    """ASCII digits with an optional leading minus (``int()`` would also take ``1_0`` and other digits)."""
    return text.isascii() and text.lstrip("-").isdigit()


def parse_lengths(text: str, k_max: int | None = None) -> tuple[int, ...]:
    """``"0,2,4,8,12"`` -> ``(0, 2, 4, 8, 12)``: the draft lengths of ``kpadauto``, sorted, each once.

    Without 0 in the set, a step whose requests all have empty drafts still verifies the smallest length in pads.

    Args:
        text: comma-separated integers (the value of ``KPAD_AUTO_LENGTHS``).
        k_max: ``num_speculative_tokens`` of the server; the largest length must equal it (None: not checked).

    Raises:
        ValueError: a non-integer, a negative length, fewer than two lengths, or a largest length other
            than ``k_max``; the message names ``KPAD_AUTO_LENGTHS`` and the fix.
    """
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not all(_is_integer(part) for part in parts):
        raise ValueError(f"{ENV_LENGTHS}={text!r}: give comma-separated integers, e.g. 0,2,4,8,12")
    lengths = sorted({int(part) for part in parts})
    if len(lengths) < 2 or lengths[0] < 0:
        raise ValueError(f"{ENV_LENGTHS}={text!r}: give at least two lengths >= 0, e.g. 0,2,4,8,12")
    if k_max is not None and lengths[-1] != k_max:
        raise ValueError(
            f"{ENV_LENGTHS}={text!r}: the largest length must be num_speculative_tokens ({k_max}), "
            f"the longest draft suffix decoding proposes; set k to {lengths[-1]} or add {k_max} to the lengths"
        )
    return tuple(lengths)


def env_int(environ: dict[str, str], name: str, default: int, minimum: int) -> int:
    """An integer setting from the environment (``default`` when unset).

    Raises:
        ValueError: not an integer, or below ``minimum``; the message names the variable.
    """
    text = environ.get(name, "").strip()
    if not text:
        return default
    if not _is_integer(text) or int(text) < minimum:
        raise ValueError(f"{name}={text!r}: give an integer >= {minimum} (default {default})")
    return int(text)


def _cost_point(point: object) -> tuple[int, float] | None:
    """``[requests, seconds]`` -> ``(requests, seconds)``: an integer >= 1 (not a bool) and a finite number >= 0."""
    if not isinstance(point, list) or len(point) != 2:
        return None
    r, t = point
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        return None
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t < 0:
        return None
    return r, float(t)


def parse_step_costs(text: str, lengths: Sequence[int]) -> dict[int, list[tuple[int, float]]]:
    """``KPAD_AUTO_STEP_COSTS``: forward times given instead of measured at server start, in the JSON the
    scheduler logs after "step costs measured:", ``{"L": [[requests, seconds], ...], ...}``.

    For tests that need the rule's choice not to depend on how busy the machine is, or to reuse costs measured
    once; the step time outside the forward pass (O) is still measured online.

    Args:
        text: the variable's value.
        lengths: the ``kpadauto`` lengths; each needs at least one point.

    Returns:
        ``{L: [(requests, seconds), ...]}`` as :class:`StepCosts` takes it.

    Raises:
        ValueError: not that JSON (a key that is not a length in digits, a point that is not ``[integer >= 1,
            finite number >= 0]``, a request count twice for one length), a length outside ``lengths``, a length
            of ``lengths`` missing or without points; the message names the variable and gives an example.
    """
    example = (
        f'{ENV_STEP_COSTS}=\'{{"0": [[1, 0.005], [32, 0.006]], "{lengths[-1]}": [[1, 0.005], [32, 0.011]], ...}}\''
    )
    try:
        raw = json.loads(text)
    except ValueError:
        raw = None
    table: dict[int, list[tuple[int, float]]] | None = {} if isinstance(raw, dict) else None
    for key, points in raw.items() if table is not None else ():
        parsed = [_cost_point(p) for p in points] if isinstance(points, list) else [None]
        counts = [p[0] for p in parsed if p is not None]
        if not (key.isascii() and key.isdigit()) or None in parsed or len(set(counts)) != len(counts):
            table = None
            break
        table[int(key)] = parsed
    if table is None or len(table) != len(raw):
        raise ValueError(
            f"{ENV_STEP_COSTS}={text!r}: give, for each length, [request count, seconds] pairs (an integer >= 1 once "
            f"per length, a finite number >= 0), e.g. {example}"
        )
    empty = sorted(length for length, points in table.items() if not points)
    if empty:
        raise ValueError(f"{ENV_STEP_COSTS}: lengths {empty} have no [request count, seconds] pairs, e.g. {example}")
    missing = sorted(set(lengths) - set(table))
    extra = sorted(set(table) - set(lengths))
    if missing or extra:
        raise ValueError(
            f"{ENV_STEP_COSTS}: lengths {sorted(table)} must be the kpadauto lengths {list(lengths)}"
            f"{f' (missing {missing})' if missing else ''}{f' (not in the set: {extra})' if extra else ''}"
        )
    return table


def skip_blocked_by(backend: object, world_size: int) -> str:
    """Why kpadauto's skipped speculation cannot work under this executor, or ``""`` when it can.

    The scheduler tells the suffix proposer to skip through a module variable (``kpad_plugin._SKIP_SPECULATION``),
    which only a worker in the scheduler's own process sees: vLLM's ``uni`` executor at world size 1 (its
    default there, ``ParallelConfig.__post_init__`` of vLLM 0.26 and 0.32). With ``mp``, ``ray`` or an executor
    class the worker runs elsewhere and would speculate on every step while the scheduler believed it skipped.

    Args:
        backend: vLLM's resolved ``parallel_config.distributed_executor_backend`` (a name, a class or None).
        world_size: ``parallel_config.world_size`` (tensor x pipeline parallel size).
    """
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    if backend == "uni" and world_size == 1:
        return ""
    return (
        f"executor backend {name} at world size {world_size} runs the worker outside the scheduler's process "
        "(only uni at world size 1 shares it)"
    )


def covering_length(lengths: Sequence[int], longest: int) -> int:
    """The smallest length in ``lengths`` (sorted) that holds a draft of ``longest`` tokens (the largest when none)."""
    i = bisect.bisect_left(lengths, longest)
    return lengths[min(i, len(lengths) - 1)]


@dataclass
class AcceptanceByPosition:
    """Counts of verified real draft tokens by draft position, and the acceptance estimate ``p_i`` from them.

    ``reached[i]``: request-steps whose verified real draft had a token at position i (0-based);
    ``accepted[i]``: those whose token at position i was accepted (accepted drafts are a prefix).
    ``p(i)`` = (accepted[i] + w p(i-1)) / (reached[i] + w), p(-1) = 1, w = :data:`PRIOR_WEIGHT`.
    Kept as counts of request-steps by real draft length and by accepted count (one increment each per
    request-step, 32 of them a step), summed into ``reached`` / ``accepted`` when asked; :meth:`probabilities` is
    computed again only after an :meth:`observe` (a step asks for it twice, in ``schedule`` and in
    ``update_draft_token_ids``, with no verified draft in between).
    """

    max_len: int
    by_length: list[int] = field(init=False)
    by_accepted: list[int] = field(init=False)
    _probabilities: list[float] | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.by_length = [0] * (self.max_len + 1)
        self.by_accepted = [0] * (self.max_len + 1)

    def observe(self, real_len: int, num_accepted: int) -> None:
        """One verified request-step: ``real_len`` real draft tokens sent, ``num_accepted`` of them accepted.

        ``num_accepted`` is clipped to ``[0, real_len]`` (pads are never accepted) and ``real_len`` to ``max_len``.
        """
        self.observe_all([(real_len, num_accepted)])

    def observe_all(self, steps: Sequence[tuple[int, int]]) -> None:
        """:meth:`observe` of each ``(real_len, num_accepted)`` pair: one call for a step's 32 verified drafts."""
        top, by_length, by_accepted = self.max_len, self.by_length, self.by_accepted
        for real_len, num_accepted in steps:
            real_len = 0 if real_len < 0 else top if real_len > top else real_len
            by_length[real_len] += 1
            by_accepted[0 if num_accepted < 0 else real_len if num_accepted > real_len else num_accepted] += 1
        if steps:
            self._probabilities = None

    @staticmethod
    def _beyond(counts: list[int]) -> list[int]:
        """``[sum(counts[1:]), sum(counts[2:]), ...]``: request-steps that reached each position 0, 1, ..."""
        out, total = [], 0
        for count in reversed(counts[1:]):
            total += count
            out.append(total)
        return out[::-1]

    @property
    def reached(self) -> list[int]:
        return self._beyond(self.by_length)

    @property
    def accepted(self) -> list[int]:
        return self._beyond(self.by_accepted)

    def probabilities(self) -> list[float]:
        """``[p_0, ..., p_{max_len-1}]``, non-increasing (each at most the one before). The same list until the next
        :meth:`observe`: do not change it."""
        if self._probabilities is not None:
            return self._probabilities
        out, prev = [], 1.0
        for reached, accepted in zip(self.reached, self.accepted, strict=True):
            p = min(prev, (accepted + PRIOR_WEIGHT * prev) / (reached + PRIOR_WEIGHT))
            out.append(p)
            prev = p
        self._probabilities = out
        return out


def expected_tokens(real_lens: Sequence[int], length: int, p: Sequence[float]) -> float:
    """Expected output tokens of one step: ``sum_r (1 + sum_{i < min(length, len_r)} p_i)``.

    Args:
        real_lens: real draft length of each request of the step.
        length: the step's draft length L (drafts longer than L are cut to L).
        p: acceptance by position, :meth:`AcceptanceByPosition.probabilities`.
    """
    return expected_by_length(real_lens, p)[max(0, min(length, len(p)))]


def expected_by_length(real_lens: Sequence[int], p: Sequence[float]) -> list[float]:
    """``[tokens(0), tokens(1), ..., tokens(len(p))]``: :func:`expected_tokens` at every length, in one pass over
    the requests' count by draft length (drafts longer than ``len(p)`` count as that long): a decode step weighs
    several lengths, and this runs on every step."""
    top, requests = len(p), len(real_lens)
    counts = [0] * (top + 1)
    for n in real_lens:  # lengths of lists: never negative
        counts[n if n < top else top] += 1
    out, below, above = [], 0.0, requests
    for count, prefix in zip(counts, accumulate(p, initial=0.0), strict=True):  # prefix: sum of p_i, i < L
        out.append(requests + below + above * prefix)  # drafts shorter than L keep their own length
        if count:
            below += count * prefix
            above -= count
    return out


@dataclass
class StepCosts:
    """Forward time of a uniform decode step, by draft length and request count, measured at server start.

    ``table[L]`` = sorted ``[(requests, seconds), ...]``. :meth:`forward` interpolates linearly in the request
    count between measured counts and extrapolates from the last two beyond them.
    ``overhead_s`` (O): the rest of a step, an exponential moving average (weight ``alpha``) of measured step
    time minus the forward time; 0 until the first measured step. ``by_length`` [L] = (O_L, samples): the same
    average over the steps run at length L alone (weight ``max(alpha, 1 / samples)``, a plain mean at first), which
    :meth:`overhead` takes once L has ``min_length_samples``: the forward times come from a dummy batch whose
    context is as short as the query, and the attention over a real context grows with 1 + L, so a length's own
    steps say what it costs at the run's contexts.
    """

    table: dict[int, list[tuple[int, float]]]
    alpha: float = 0.05
    overhead_s: float = 0.0
    samples: int = 0
    by_length: dict[int, tuple[float, int]] = field(default_factory=dict)
    min_length_samples: int = 8

    def __post_init__(self) -> None:
        """Sort each length's points and keep one per request count (the last); drop lengths without points."""
        self.table = {
            length: sorted(dict((int(r), float(t)) for r, t in points).items())
            for length, points in self.table.items()
            if points
        }
        self._counts = {length: [r for r, _ in points] for length, points in self.table.items()}

    def forward(self, length: int, requests: int) -> float:
        """Seconds of the forward pass of ``requests`` requests at draft length ``length``.

        Raises:
            KeyError: ``length`` was not measured.
        """
        points = self.table[length]
        if len(points) == 1:
            return points[0][1]
        i = min(max(bisect.bisect_left(self._counts[length], requests), 1), len(points) - 1)
        (r0, t0), (r1, t1) = points[i - 1], points[i]
        return max(0.0, t0 + (t1 - t0) * (requests - r0) / (r1 - r0))

    def overhead(self, length: int) -> float:
        """O_L where length L has ``min_length_samples`` measured steps, else the shared :attr:`overhead_s`."""
        own, n = self.by_length.get(length, (0.0, 0))
        return own if n >= self.min_length_samples else self.overhead_s

    def cost(self, length: int, requests: int) -> float:
        """Seconds of one step: :meth:`overhead` + :meth:`forward`."""
        return self.overhead(length) + self.forward(length, requests)

    def observe_step(self, length: int, requests: int, seconds: float) -> None:
        """A measured decode step (all ``requests`` at ``length``) updates the shared and the length's overhead."""
        if length not in self.table or not math.isfinite(seconds) or seconds <= 0:
            return
        sample = max(0.0, seconds - self.forward(length, requests))
        self.overhead_s = sample if self.samples == 0 else (1 - self.alpha) * self.overhead_s + self.alpha * sample
        self.samples += 1
        own, n = self.by_length.get(length, (0.0, 0))
        weight = max(self.alpha, 1 / (n + 1))
        self.by_length[length] = ((1 - weight) * own + weight * sample, n + 1)


def choose_length(
    real_lens: Sequence[int],
    lengths: Sequence[int],
    p: Sequence[float],
    costs: StepCosts | None,
    explore: bool = False,
    tokens: Sequence[float] | None = None,
) -> int:
    """The draft length of the next decode step (module docstring: ``L* = argmax tokens(L) / cost(L)``).

    Args:
        real_lens: real draft length of each request of the step (at least one request).
        lengths: the allowed lengths, sorted.
        p: acceptance by position.
        costs: the step costs; None (not measured), or a candidate length without a measured cost, falls back to
            the covering length.
        explore: take the next longer length than L* instead (when one is still at or below the covering one).
        tokens: :func:`expected_by_length` of ``real_lens`` and ``p`` when the caller has it already.

    Returns:
        One of ``lengths``; ties go to the shorter length.
    """
    cover = covering_length(lengths, max(real_lens, default=0))
    candidates = [n for n in lengths if n <= cover]
    if costs is None or any(n not in costs.table for n in candidates):
        return cover
    tokens = expected_by_length(real_lens, p) if tokens is None else tokens
    n, top = len(real_lens), len(tokens) - 1
    best, best_rate = candidates[0], -1.0
    for length in candidates:
        rate = tokens[min(length, top)] / max(costs.cost(length, n), 1e-9)
        if rate > best_rate * (1 + 1e-9):
            best, best_rate = length, rate
    if explore and best < cover:
        return candidates[candidates.index(best) + 1]
    return best


def no_draft_pays(
    requests: int,
    lengths: Sequence[int],
    p: Sequence[float],
    costs: StepCosts | None,
    unpadded: UnpaddedCosts | None = None,
) -> bool:
    """Whether :func:`choose_step` picks 0 for ``requests`` requests even with full drafts of ``lengths[-1]``.

    Full drafts give every length its most expected tokens while the costs stay the same and L = 0 gains
    nothing from drafts, so then L* = 0 for any drafts of the same ``requests``: the step's proposals can be
    skipped. False without
    measured costs (the rule then pads to the covering length), without 0 in ``lengths``, or for no request.
    """
    if requests < 1 or not lengths or lengths[0] != 0:
        return False
    full = [requests + requests * prefix for prefix in accumulate(p, initial=0.0)]  # expected_by_length, full drafts
    return choose_step([lengths[-1]] * requests, lengths, p, costs, unpadded, tokens=full) == 0


@dataclass
class UnpaddedCosts:
    """Step time of unpadded decode steps, learned online: ``seconds = a + b v``, v the tokens a step verifies.

    A least-squares line over the steps observed, each weighted by ``(1 - alpha)`` per later step (recent steps
    count most). With fewer than 2 steps, or all at one v, the line is flat at their weighted mean.
    """

    alpha: float = 0.05
    samples: int = 0
    _w: float = 0.0
    _x: float = 0.0
    _y: float = 0.0
    _xx: float = 0.0
    _xy: float = 0.0

    def observe_step(self, verified: int, seconds: float) -> None:
        """An unpadded decode step that verified ``verified`` tokens in ``seconds``."""
        if verified <= 0 or not math.isfinite(seconds) or seconds <= 0:
            return
        keep = 1.0 - self.alpha
        self._w, self._x, self._y = keep * self._w + 1, keep * self._x + verified, keep * self._y + seconds
        self._xx, self._xy = keep * self._xx + verified * verified, keep * self._xy + verified * seconds
        self.samples += 1

    def line(self) -> tuple[float, float]:
        """``(a, b)`` of ``seconds = a + b v``; ``(0, 0)`` before any step."""
        if self._w <= 0:
            return 0.0, 0.0
        mean_x, mean_y = self._x / self._w, self._y / self._w
        var = self._xx / self._w - mean_x * mean_x
        if self.samples < 2 or var <= 1e-9 * max(1.0, mean_x * mean_x):
            return mean_y, 0.0
        b = max(0.0, (self._xy / self._w - mean_x * mean_y) / var)
        return mean_y - b * mean_x, b

    def cost(self, verified: int) -> float:
        """Seconds of an unpadded step that verifies ``verified`` tokens (at least 1e-9)."""
        a, b = self.line()
        return max(a + b * verified, 1e-9)


def choose_step(
    real_lens: Sequence[int],
    lengths: Sequence[int],
    p: Sequence[float],
    costs: StepCosts | None,
    unpadded: UnpaddedCosts | None,
    explore: bool = False,
    retime_unpadded: bool = False,
    tokens: Sequence[float] | None = None,
) -> int:
    """The next decode step's draft length (:func:`choose_length`), or :data:`UNPADDED` when the step pays more
    unpadded: expected tokens of the uncut drafts / :meth:`UnpaddedCosts.cost` of the tokens they verify, against
    the best padded length's tokens / cost. With ``unpadded`` None (``KPAD_AUTO_UNPADDED`` off) or without measured
    padded costs: :func:`choose_length`. ``explore``: an unpadded step while none has been timed or when
    ``retime_unpadded`` (the plugin sets it on every other exploration step), else :func:`choose_length`'s
    exploration, even where the unpadded step would pay more (so padded costs are timed again too). ``tokens``:
    :func:`expected_by_length` of ``real_lens`` and ``p`` when the caller has it already.
    """
    cover = covering_length(lengths, max(real_lens, default=0))
    if unpadded is None or costs is None or any(n not in costs.table for n in lengths if n <= cover):
        return choose_length(real_lens, lengths, p, costs, explore=explore, tokens=tokens)
    if explore and (unpadded.samples == 0 or retime_unpadded):  # never timed, or timed again
        return UNPADDED
    tokens = expected_by_length(real_lens, p) if tokens is None else tokens  # once per step, for every length
    padded = choose_length(real_lens, lengths, p, costs, explore=explore, tokens=tokens)
    if explore or unpadded.samples == 0:  # exploration times a padded length too; never timed: never chosen
        return padded
    n, top = len(real_lens), len(tokens) - 1
    padded_rate = tokens[min(padded, top)] / max(costs.cost(padded, n), 1e-9)
    unpadded_rate = tokens[min(cover, top)] / unpadded.cost(n + sum(real_lens))
    return UNPADDED if unpadded_rate > padded_rate * (1 + 1e-9) else padded
