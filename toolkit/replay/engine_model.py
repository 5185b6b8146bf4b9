"""One engine of the replay: a continuous-batching engine in the style of vLLM V1 (``EngineModel``), and its limits
(``EngineConfig``).

Per engine step:

* a FCFS waiting queue; running requests are served first, in admission order;
* a token budget per step (``max_num_batched_tokens``) shared by decodes (1 token each) and prefill chunks
  (chunked prefill: a prompt may be split across steps);
* with speculative decoding, a decode takes 1 + its draft tokens of the budget (vLLM V1's scheduler counts a
  running request's draft tokens as tokens to schedule) and the KV blocks for all of them, and gains the tokens
  accepted: the run's measured mean, spread evenly over its steps; each scheduled request (decode or prompt chunk)
  takes ``draft_slots`` more of the budget (vLLM's input budget for the drafter);
* a prompt chunk of at most ``long_prefill_token_threshold`` tokens a request a step, while more than one request is
  running or waiting (vLLM 0.32's rule; with ``long_prefill_adaptive``, at least the budget's share per request);
* ``max_num_seqs`` running sequences;
* KV capacity in blocks of ``block_size`` tokens, one fewer than the engine has: vLLM V1's block pool keeps one
  (block 0) as the null block, a placeholder no request writes (``BlockPool.null_block``; its KV usage gauge is
  over the others: M_spike's 24 blocks log usage in 23rds). When a running request cannot get the block its next
  tokens need, the most recently admitted running request is preempted (recompute: its blocks are freed,
  it goes back to the front of the queue and later re-prefills prompt + tokens generated so far), as vLLM
  V1 does. No new request is admitted in a step that preempted;
* a waiting request is admitted only where its whole sequence so far (prompt, and the tokens generated before a
  preemption) fits the free blocks, not only its first chunk (vLLM 0.32's ``scheduler_reserve_full_isl``, on by
  default: a long prompt does not start prefilling into room its later chunks would not find).

Step time is a ``StepCost`` (``lltrace.replay.cost``). Every output is a model estimate.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from lltrace.replay.cost import StepCost


@dataclass(frozen=True)
class EngineConfig:
    """Scheduler limits of the engine being replayed."""

    num_blocks: int
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    # speculative decoding: the tokens a decoding request gains a step, the draft tokens its step verifies, and the
    # budget tokens the scheduler charges each scheduled request beyond its own for the drafter's input
    tokens_per_decode_step: float = 1.0
    draft_tokens_per_decode_step: float = 0.0
    draft_slots: float = 0.0
    # vLLM's cap on one request's prompt chunk a step (0: none) and its adaptive floor (the budget's fair share)
    long_prefill_token_threshold: int = 0
    long_prefill_adaptive: bool = False
    # data-parallel engines, each with these limits and blocks (``lltrace.replay.scheduler`` routes requests to them)
    data_parallel_size: int = 1

    @property
    def drafting(self) -> bool:
        """Whether its decodes draft (then the replay steps request by request: the decoder aggregate takes one token
        a step)."""
        return self.tokens_per_decode_step > 1 or self.draft_tokens_per_decode_step > 0


SPECULATIVE = ("tokens_per_decode_step", "draft_tokens_per_decode_step", "draft_slots")
"""The ``EngineConfig`` fields of speculative decoding (the replay's settings of the same names)."""
OPTIONAL = {
    "long_prefill_token_threshold": int,
    "long_prefill_adaptive": bool,
    "data_parallel_size": int,
} | dict.fromkeys(SPECULATIVE, float)
"""The ``EngineConfig`` fields a run's settings may lack (then the field's default), with their types."""


def _steps_before(span: float, dt: float) -> int:
    """How many steps of ``dt`` start within the next ``span`` seconds (0 when ``span`` <= 0)."""
    ahead = span / dt
    return max(0, math.ceil(ahead) if ahead != int(ahead) else int(ahead))


class EngineModel:
    """State of one engine's replay and its step rules.

    Running requests are kept two ways. *Individuals* (prefilling, just admitted, or re-prefilling after a
    preemption) carry their own token and block counts. *Decoders* (prefill done: one token per step) are
    kept in aggregate against ``decode_steps``, the number of steps in which every decoder decoded: a
    decoder's tokens are its tokens when it joined plus the decode steps since, the blocks it takes next
    step follow from where that count sits in its block (``phase``), and finishing is a heap keyed by the
    decode step of its last token. A step in which every running request is scheduled and the KV blocks
    suffice then costs time in the number of individuals, not the batch. Any other step (preemption, a
    budget that starves a request) turns every decoder back into an individual and runs the rules request
    by request; ``_fast_step`` and ``_exact_step`` give the same result, which the tests check against the
    request-by-request path (``fast_forward=False``).
    """

    def __init__(
        self,
        arrival: np.ndarray,
        inp: np.ndarray,
        out: np.ndarray,
        config: EngineConfig,
        cost: StepCost,
        cached: list[int] | None,
        pauses: list[tuple[float, float]],
        arrivals: list[int] | None = None,
    ) -> None:
        n = arrival.size
        self.config = config
        self.cost = cost
        self.bs = config.block_size
        # per-request state (python lists are faster than numpy scalars in the step loop)
        # the requests this engine serves, in arrival order: all of them, or (data parallel) those routed to it so far
        self.arrivals = np.argsort(arrival, kind="stable").tolist() if arrivals is None else arrivals
        self.arr = arrival.tolist()
        self.prompt = inp.tolist()
        self.gen_target = out.tolist()
        self.cached = cached
        self.hit_prefills = 0  # requests the step being built starts prefilling on a prefix-cache hit
        self.computed = [0] * n  # tokens whose KV is in cache
        self.generated = [0] * n  # output tokens produced
        self.blocks = [0] * n
        self.queued = [math.nan] * n  # the step boundary at which the engine took it into its queue
        self.first_sched = [math.nan] * n
        self.first_token = [math.nan] * n
        self.finished = [math.nan] * n
        self.preempted = [0] * n
        self.status = ["ok"] * n
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.individuals: list[int] = []  # running requests not in the decoder aggregate, in running order
        self.capacity = max(config.num_blocks - 1, 1)  # the null block kept out (module docstring)
        self.free = self.capacity
        self.t = self.arr[self.arrivals[0]] if self.arrivals else min(self.arr, default=0.0)
        self.nxt = 0
        self.pauses = sorted(pauses)  # (start, end): no step starts inside
        self.next_pause = 0
        self.done = self.steps = self.preemptions = self.max_running = self.max_waiting = self.peak_blocks = 0
        self.busy = 0.0
        self.prefill_tokens = self.prompt_steps = 0
        self.left: list[float] = []  # when each request that left the engine (finished, rejected, stalled) left it
        self.horizon = math.inf  # no step starts at or after it (``run``'s ``until``)
        self.notes: list[str] = []
        # decoder aggregate
        self.decode_steps = 0
        self.decoders = 0
        self.phase = [0] * self.bs  # decoders needing a new block when decode_steps % bs == k
        self.ctx_base = 0  # sum over decoders of (tokens at join - decode_steps at join)
        self.finish_heap: list[tuple[int, int]] = []  # (decode step of the last token, request)
        self.joined_at = [-1] * n
        self.tokens_at_join = [0] * n
        self.generated_at_join = [0] * n
        # speculative decoding (request by request only): the tokens a decode gains, the budget it takes
        self.gain = config.tokens_per_decode_step
        self.decode_budget = 1.0 + config.draft_tokens_per_decode_step
        self.drafting = config.drafting
        self.slots = config.draft_slots if self.drafting else 0.0  # each scheduled request's extra budget
        self.decodes = [0] * n  # decode steps each request has taken
        self.cap = 0  # the step's cap on one request's prompt chunk (0: none)

    # -- the decoder aggregate --------------------------------------------------------------------------

    def _join(self, r: int) -> None:
        d = self.decode_steps
        c = self.computed[r]
        self.joined_at[r] = d
        self.tokens_at_join[r] = c
        self.generated_at_join[r] = self.generated[r]
        self.decoders += 1
        self.phase[(d - c) % self.bs] += 1
        self.ctx_base += c - d
        heapq.heappush(self.finish_heap, (d + self.gen_target[r] - self.generated[r], r))

    def _regroup(self) -> None:
        """After a request-by-request step: decoders join the aggregate, the rest stay individuals."""
        prompt, generated, computed, first_token = self.prompt, self.generated, self.computed, self.first_token
        self.individuals = []
        for r in self.running:
            if computed[r] == prompt[r] + generated[r] - 1 and not math.isnan(first_token[r]):
                self._join(r)
            else:
                self.individuals.append(r)

    def _dissolve(self) -> None:
        """Every decoder back to an individual with its own counts."""
        bs = self.bs
        for r in self.running:
            j = self.joined_at[r]
            if j >= 0:
                k = self.decode_steps - j
                self.computed[r] = self.tokens_at_join[r] + k
                self.generated[r] = self.generated_at_join[r] + k
                self.blocks[r] = -(-self.computed[r] // bs)
                self.joined_at[r] = -1
        self.decoders = self.ctx_base = 0
        self.phase = [0] * bs
        self.finish_heap = []
        self.individuals = list(self.running)

    # -- step rules -------------------------------------------------------------------------------------

    def _gone(self) -> None:
        """A request left the engine at the current step's end."""
        self.done += 1
        self.left.append(self.t)

    def _prefill_cap(self) -> int:
        """The most prompt tokens one request may take in the step about to be built (0: no cap), as vLLM 0.32's
        scheduler reckons it once a step: ``long_prefill_token_threshold`` while more than one request is running
        or waiting (a request alone starves nobody), floored at the budget's share per request when adaptive; only
        with chunked prefill."""
        cfg = self.config
        eligible = len(self.running) + len(self.waiting)
        if cfg.long_prefill_token_threshold <= 0 or eligible <= 1 or not cfg.chunked_prefill:
            return 0
        if cfg.long_prefill_adaptive:
            return max(cfg.long_prefill_token_threshold, cfg.max_num_batched_tokens // eligible)
        return cfg.long_prefill_token_threshold

    def _admit(self, budget: float, scheduled: list[tuple[int, int]]) -> tuple[float, int]:
        """Admit from the queue head while the budget, ``max_num_seqs`` and free blocks allow."""
        cfg, bs, cached = self.config, self.bs, self.cached
        waiting, running, prompt = self.waiting, self.running, self.prompt
        p_tokens = 0
        slots = self.slots
        while waiting and budget >= 1 + slots and len(running) < cfg.max_num_seqs:
            r = waiting[0]
            target = prompt[r] + self.generated[r]
            if -(-(prompt[r] + self.gen_target[r]) // bs) > self.capacity:
                waiting.popleft()
                self.status[r] = "rejected"
                self._gone()
                continue
            hit = min(cached[r], target - 1) if cached is not None and math.isnan(self.first_sched[r]) else 0
            take = min(target - hit, int(budget - slots), self.cap or target)
            if not cfg.chunked_prefill and take < target - hit:
                break
            want = -(-(hit + take) // bs)
            if want > self.free or -(-target // bs) > self.free:  # the chunk's blocks, and room for the whole
                break
            waiting.popleft()
            self.free -= want
            self.blocks[r] = want
            self.computed[r] = hit
            running.append(r)
            self.individuals.append(r)
            if math.isnan(self.first_sched[r]):
                self.first_sched[r] = self.t
            scheduled.append((r, take))
            self.hit_prefills += hit > 0
            p_tokens += take
            budget -= take + slots
        return budget, p_tokens

    def _advance(self, r: int, take: int) -> int:
        """After the step: ``take`` more tokens of ``r`` computed. 0 still prefilling, 1 sampled, 2 finished.

        The tokens sampled are those computed beyond the request's tokens so far, plus the next one: one after a
        prefill or a plain decode, the accepted draft tokens and one more after a drafting decode."""
        self.computed[r] += take
        beyond = self.computed[r] - self.prompt[r] - self.generated[r]
        if beyond < 0:
            return 0
        self.generated[r] += beyond + 1
        if math.isnan(self.first_token[r]):
            self.first_token[r] = self.t
        if self.generated[r] < self.gen_target[r]:
            return 1
        self.finished[r] = self.t
        self.free += self.blocks[r]
        self.blocks[r] = 0
        self.running.remove(r)
        self._gone()
        return 2

    def _gained(self, r: int) -> int:
        """The tokens the next drafting decode of ``r`` gains: the measured mean a step, spread evenly over its steps
        (the j-th gains floor(j L) - floor((j - 1) L)), at most the tokens it has left."""
        j = self.decodes[r]
        step = int((j + 1) * self.gain + 1e-9) - int(j * self.gain + 1e-9)
        return max(1, min(step, self.gen_target[r] - self.generated[r]))

    def _run_step(self, p_tokens: int, d_tokens: int, ctx: int) -> float:
        self.prefill_tokens += p_tokens
        self.prompt_steps += p_tokens > 0
        dt = self.cost(p_tokens, d_tokens, ctx, self.hit_prefills, self.t)
        self.hit_prefills = 0
        self.t += dt
        self.busy += dt
        self.steps += 1
        # occupancy while the step runs, before finished requests free their blocks
        self.peak_blocks = max(self.peak_blocks, self.capacity - self.free)
        self.max_running = max(self.max_running, len(self.running))
        return dt

    def _exact_step(self) -> str:
        """One step, request by request, preempting when blocks run out.

        Returns ``"stepped"``, ``"preempted"`` (blocks were freed, nothing ran: the queue head goes next) or
        ``"idle"`` (nothing could be scheduled).
        """
        cfg, bs = self.config, self.bs
        running, waiting = self.running, self.waiting
        prompt, generated, computed, blocks = self.prompt, self.generated, self.computed, self.blocks
        budget: float = cfg.max_num_batched_tokens  # a drafting decode's share of it is the mean 1 + draft tokens
        p_tokens = d_tokens = ctx = 0
        scheduled: list[tuple[int, int]] = []
        preempted_now = False
        self.cap = cap = self._prefill_cap()
        i = 0
        while i < len(running) and budget >= 1 + self.slots:
            r = running[i]
            target = prompt[r] + generated[r]  # tokens that must be in KV before the next token is sampled
            need = target - computed[r] if computed[r] < target else 1
            if need > 1 and not cfg.chunked_prefill and need > budget - self.slots:
                break
            take = min(need, int(budget - self.slots), cap or need)
            held = take  # the tokens whose KV the step writes
            if need == 1 and self.drafting:  # a drafting decode: its draft tokens verified, the accepted kept
                spend = min(self.decode_budget, budget - self.slots)
                take = self._gained(r)
                held = max(take, math.ceil(spend))
            else:
                spend = take
            spend += self.slots
            want = -(-(computed[r] + held) // bs) - blocks[r]
            while want > self.free:
                victim = running.pop()
                self.free += blocks[victim]
                blocks[victim] = 0
                computed[victim] = 0
                self.preempted[victim] += 1
                self.preemptions += 1
                preempted_now = True
                waiting.appendleft(victim)
                if victim == r:
                    break
            if r not in running[i : i + 1]:
                break  # r itself was preempted
            self.free -= max(want, 0)
            blocks[r] += max(want, 0)
            scheduled.append((r, take))
            ctx += computed[r]
            if need > 1:
                p_tokens += take
            else:
                d_tokens += 1
                self.decodes[r] += 1
            budget -= spend
            i += 1
        if not preempted_now:
            budget, admitted = self._admit(budget, scheduled)
            p_tokens += admitted
        if not scheduled:
            return "preempted" if preempted_now else "idle"
        self._run_step(p_tokens, d_tokens, ctx)
        for r, take in scheduled:
            self._advance(r, take)
        return "stepped"

    def _fast_step(self) -> bool:
        """One step with decoders in aggregate; False (and nothing changed) when it needs ``_exact_step``."""
        bs, free = self.bs, self.free
        running, individuals = self.running, self.individuals
        prompt, generated, computed, blocks = self.prompt, self.generated, self.computed, self.blocks
        budget = self.config.max_num_batched_tokens
        n_dec = self.decoders
        want_total = self.phase[self.decode_steps % bs] if n_dec else 0
        ctx = self.ctx_base + n_dec * self.decode_steps
        p_tokens, d_tokens = 0, n_dec
        plan: list[tuple[int, int, int]] = []
        seen = 0  # decoders ahead of the individual being planned
        self.cap = cap = self._prefill_cap()
        for k, r in enumerate(individuals):
            ahead = running.index(r) - k - seen
            if ahead > budget:
                return False  # the budget runs out among decoders
            budget -= ahead
            seen += ahead
            if budget <= 0:
                return False
            target = prompt[r] + generated[r]
            need = target - computed[r] if computed[r] < target else 1
            if need > 1 and not self.config.chunked_prefill and need > budget:
                return False
            take = min(need, budget, cap or need)
            want = -(-(computed[r] + take) // bs) - blocks[r]
            want_total += want
            plan.append((r, take, want))
            ctx += computed[r]
            if need > 1:
                p_tokens += take
            else:
                d_tokens += 1
            budget -= take
        rest = n_dec - seen  # decoders after the last individual
        if rest > budget or want_total > free:
            return False
        budget -= rest
        # every running request is scheduled and the blocks suffice: no preemption in this step
        self.free = free - want_total
        for r, _, want in plan:
            blocks[r] += want
        scheduled = [(r, take) for r, take, _ in plan]
        budget, admitted = self._admit(budget, scheduled)
        p_tokens += admitted
        dt = self._run_step(p_tokens, d_tokens, ctx)
        completed = False
        if n_dec:
            self.decode_steps += 1
            d = self.decode_steps
            heap = self.finish_heap
            while heap and heap[0][0] <= d:
                _, r = heapq.heappop(heap)
                j, c0 = self.joined_at[r], self.tokens_at_join[r]
                c = c0 + d - j
                self.free += -(-c // bs)
                computed[r], generated[r], blocks[r] = c, self.gen_target[r], 0
                self.finished[r] = self.t
                running.remove(r)
                self._gone()
                completed = True
                self.decoders -= 1
                self.phase[(j - c0) % bs] -= 1
                self.ctx_base -= c0 - j
                self.joined_at[r] = -1
        for r, take in scheduled:
            state = self._advance(r, take)
            if state:
                individuals.remove(r)
                if state == 1:
                    self._join(r)
                else:
                    completed = True
        if p_tokens == 0 and not completed and not individuals and self.cost.c_ctx == 0 and not self.cost.timed:
            self._skip_decode_steps(dt)
        return True

    def _skip_decode_steps(self, dt: float) -> None:
        """Apply at once the run of identical decode-only steps that follows a decode-only step.

        They repeat until a request finishes, an arrival could be admitted, or blocks run short.
        """
        jump = self.finish_heap[0][0] - self.decode_steps - 1
        if not self.waiting and self.nxt < len(self.arrivals):
            jump = min(jump, _steps_before(self.arr[self.arrivals[self.nxt]] - self.t, dt))
        if self.horizon < math.inf:  # a request may be routed here at the horizon: no step starts after it
            jump = min(jump, _steps_before(self.horizon - self.t, dt))
        if self.next_pause < len(self.pauses):
            jump = min(jump, _steps_before(self.pauses[self.next_pause][0] - self.t, dt))
        if jump <= 0:
            return
        # blocks needed by j more steps: the decoders whose phase comes up in those steps
        bs, n_dec, phase, d = self.bs, self.decoders, self.phase, self.decode_steps
        cycles = min(jump // bs, self.free // n_dec)
        steps, used = cycles * bs, cycles * n_dec
        while steps < jump:
            more = phase[(d + steps) % bs]
            if used + more > self.free:
                break
            used += more
            steps += 1
        if steps:
            t0 = self.t
            self.decode_steps += steps
            self.free -= used
            self.t += steps * dt
            self.busy += steps * dt
            self.steps += steps
            # arrivals during the run of steps join the queue at the end of the step they arrived in
            while self.nxt < len(self.arrivals) and self.arr[self.arrivals[self.nxt]] <= self.t:
                r = self.arrivals[self.nxt]
                self.waiting.append(r)
                self.queued[r] = t0 + _steps_before(self.arr[r] - t0, dt) * dt
                self.nxt += 1

    def run(self, fast_forward: bool, until: float = math.inf) -> None:
        """Step until every request this engine has been given has left it, or (``until``) until the next step
        would start at or after that time: the engine's state then is what a router sees at ``until``."""
        arr, arrivals, pauses = self.arr, self.arrivals, self.pauses
        n = len(arrivals)
        self.horizon = until
        while self.done < n and self.t < until:
            if self.next_pause < len(pauses) and self.t >= pauses[self.next_pause][0]:
                self.t = max(self.t, pauses[self.next_pause][1])
                self.next_pause += 1
                continue
            while self.nxt < n and arr[arrivals[self.nxt]] <= self.t:
                self.waiting.append(arrivals[self.nxt])
                self.queued[arrivals[self.nxt]] = self.t
                self.nxt += 1
            if not self.running and not self.waiting:
                if self.nxt >= n:
                    return  # idle until a request is routed here
                self.t = arr[arrivals[self.nxt]]
                continue
            if not (fast_forward and self.running and self._fast_step()):
                if self.decoders:
                    self._dissolve()
                outcome = self._exact_step()
                if fast_forward:
                    self._regroup()
                else:
                    self.individuals.clear()
                if outcome == "preempted":
                    continue
                if outcome == "idle":
                    if self.nxt < n and not self.running:
                        self.t = max(self.t, arr[arrivals[self.nxt]])
                        continue
                    self.notes.append(f"scheduler stalled at t={self.t:.3f}s with {len(self.waiting)} waiting")
                    for r in list(self.waiting) + self.running:
                        self.status[r] = "stalled"
                        self._gone()
                    break
            self.max_waiting = max(self.max_waiting, len(self.waiting))

    # -- as one of several data-parallel engines ------------------------------------------------------------

    def in_flight(self, t: float) -> int:
        """Requests routed here that have not left by ``t`` (after ``run(..., until=t)``)."""
        later = 0
        for left in reversed(self.left):
            if left <= t:
                break
            later += 1
        return len(self.arrivals) - self.done + later

    def load(self) -> tuple[int, float]:
        """(requests waiting, routed here or queued but not scheduled; the KV cache's share in use)."""
        waiting = len(self.waiting) + len(self.arrivals) - self.nxt
        return waiting, 1.0 - self.free / self.capacity
