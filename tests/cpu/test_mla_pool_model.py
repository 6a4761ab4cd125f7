"""The tile pools' protocol (kernel_hopper "Tile pools", ``POOL`` in the second fp8 tokens-on-M kernel and, with two
buffers, in the bf16 tokens-on-M kernel: the same tiles before claiming, the same base and reset) as a model in
Python, run over random batches, grids and interleavings of the programs' claims: every tile of every request is
taken exactly once, each launch leaves the claim counters at zero, and the partial slots and whole-request outputs are
those the reduction reads (a request's participants' slots contiguous, its first and last written once each). The
model follows the kernels' integer arithmetic (``_split_start``'s even split, ``_segment``, ``_pool_part``, the
pre-assigned tiles, ``left``, the pool's base and the last claim's reset) line by line; the kernels themselves run
only on a GPU (tests/gpu/test_mla_hopper_tok_gpu.py)."""
from __future__ import annotations

import random

import pytest

BLOCK_N = 64


def _even_split(lens: list[int], programs: int, v: int) -> tuple[int, int, int]:
    tiles = [(max(n, 0) + BLOCK_N - 1) // BLOCK_N for n in lens]
    total = sum(tiles)
    per = (total + programs - 1) // programs
    return v * per, min(v * per + per, total), per


def _segments(lens: list[int], t: int, t_stop: int):
    """``kernel_hopper._segment`` over a program's range ``[t, t_stop)``: (request, its tiles, where its tiles start
    in the batch's order, i_first, i_stop)."""
    tiles = [(max(n, 0) + BLOCK_N - 1) // BLOCK_N for n in lens]
    req_end = 0
    for b, req_tiles in enumerate(tiles):
        req_start, req_end = req_end, req_end + req_tiles
        if req_tiles == 0 or req_end <= t:
            continue
        if req_start >= t_stop:
            break
        yield b, req_tiles, req_start, max(t, req_start) - req_start, min(t_stop, req_end) - req_start


def _pool_part(t_start_of_request: int, req_tiles: int, v: int, per: int) -> tuple[int, int]:
    p0 = t_start_of_request // per
    return v - p0, (t_start_of_request + req_tiles - 1) // per - p0 + 1


def _pool_program(pid: int, programs: int, spread: int) -> int:
    """``kernel_hopper._pool_program``."""
    if spread == 1:
        return pid
    q = max(programs // spread, 1)
    return (pid % q) * spread + pid // q if pid < q * spread else pid


def _launch(lens: list[int], programs: int, num_buf: int, spread: int, counters: list[int], rng: random.Random):
    """One launch: each program's segments as coroutines stepping one claim at a time, interleaved at random."""
    taken: dict[tuple[int, int], int] = {}
    slots: dict[int, set[int]] = {}
    first: dict[int, list[int]] = {}
    last: dict[int, list[int]] = {}
    whole: dict[int, int] = {}

    def program(pid: int):
        v = _pool_program(pid, programs, spread)
        t, t_stop, per = _even_split(lens, programs, v)
        if t < t_stop:      # (kernel_hopper._live_per: the kernels read per off their own range)
            assert max(t // max(v, 1), t_stop - t) == per, (v, t, t_stop, per)
        for b, req_tiles, req_start, i_first, i_stop in _segments(lens, t, t_stop):
            # (the kernel: _pool_part(t, i_first, ...) with t the segment's first tile, t - i_first = req_start)
            j, n = _pool_part(req_start, req_tiles, v, per)
            assert 0 <= j < n <= req_tiles and i_first < i_stop
            mine = [j + k * n for k in range(num_buf) if j + k * n < req_tiles]
            left = min((req_tiles - j + n - 1) // n, num_buf)
            assert left == len(mine)
            base, pool = num_buf * n, req_tiles - num_buf * n
            if pool > 0:
                while True:
                    yield
                    c = counters[b]
                    counters[b] += 1
                    if c < pool:
                        mine.append(base + c)
                    else:
                        if c == pool + n - 1:
                            counters[b] = 0
                        break
            for tile in mine:
                taken[(b, tile)] = taken.get((b, tile), 0) + 1
            slots.setdefault(b, set()).add(v + b)
            if n == 1:
                whole[b] = whole.get(b, 0) + 1
            if j == 0:
                first.setdefault(b, []).append(v + b)
            if j == n - 1:
                last.setdefault(b, []).append(v + b)

    live = [program(pid) for pid in range(programs)]
    while live:
        g = rng.choice(live)
        try:
            next(g)
        except StopIteration:
            live.remove(g)
    return taken, slots, first, last, whole


@pytest.mark.parametrize("seed", range(40))
def test_pool_protocol_takes_every_tile_once_and_leaves_counters_at_zero(seed):
    rng = random.Random(seed)
    batch = rng.choice([1, 2, 3, 8, 32, 64, 128, 200])
    lens = [rng.choice([0, 1, 63, 64, 65, rng.randint(1, 9000), 4096]) for _ in range(batch)]
    if not any(n > 0 for n in lens):
        lens[0] = 1
    programs = rng.choice([1, 2, 7, 14, 132, 264])
    num_buf = rng.choice([2, 3])
    spread = rng.choice([1, 8])
    assert sorted(_pool_program(p, programs, spread) for p in range(programs)) == list(range(programs))
    counters = [0] * batch
    for _ in range(3):      # (a step's layers: each launch finds the counters as the last left them)
        taken, slots, first, last, whole = _launch(lens, programs, num_buf, spread, counters, rng)
        for b, n in enumerate(lens):
            tiles = (max(n, 0) + BLOCK_N - 1) // BLOCK_N
            got = sorted(tile for (bb, tile), c in taken.items() if bb == b for _ in range(c))
            assert got == list(range(tiles)), (b, n, got[:8])
            if tiles:
                s = sorted(slots[b])
                assert s == list(range(s[0], s[-1] + 1)), (b, s)
                assert first[b] == [s[0]] and last[b] == [s[-1]], (b, first[b], last[b], s)
                assert whole.get(b, 0) == (1 if len(s) == 1 else 0)
        assert counters == [0] * batch, counters
