"""A hand-written model of P8's tile-buffer protocol (kernel_hopper_pp8 with ``P8 = 1``: the fp8 tiles in their own
buffers, each warpgroup transposing its half of V out of them), run under random interleavings of its two warpgroups
and random TMA completion order, for each EI x TE x WL1 the kernel takes.

It checks the design, not the Gluon code (the model mirrors ``_pp8_wg0`` / ``_pp8_wg1`` by hand: change both
together): no deadlock; every read of a buffer (a warpgroup's transposition load of its half, the owner's score MMAs
from issue to retirement) finds the tile it expects landed there; no TMA is issued into a buffer before the tile in it
was read whole (both halves and the scores); the parity waits never skip a phase (a skipped one reads a wrong tile).
The P hand-offs, the P.V MMAs (which read P8's V^T buffers, not the tile's) and partial-tile zeroing (a warpgroup's
half of a request's last tile, rows past its length, zeroed in the buffer within that half's read) are not
modelled: without the hand-offs the warpgroups interleave more freely than the kernel lets them, so a schedule the
model passes is safe for the tile buffers, and one it fails may still be one the hand-offs would have saved.
``--mutate`` moves EI's copy of the tile two on before WG0's wait for WG1's read of the buffer: the model must then
fail, which is how it was checked to check something.

    python benchmarks/probes/p8_protocol_model.py            # prints the failures (0 expected)
    python benchmarks/probes/p8_protocol_model.py --mutate   # the same with the mutation (more than 0 expected)
"""
from __future__ import annotations

import argparse
import random
from itertools import product


class Dead(Exception):
    pass


class Bar:
    """An mbarrier of one arrival a phase: ``c`` phases completed; a wait for parity p passes once phase p is done."""

    def __init__(self) -> None:
        self.c = 0

    def done(self, parity: int) -> bool:
        return self.c % 2 != parity


class Sim:
    def __init__(self, rng: random.Random, nbuf: int) -> None:
        self.rng = rng
        self.nbuf = nbuf
        self.land = [Bar() for _ in range(nbuf)]
        self.rsrc = [Bar() for _ in range(nbuf)]
        self.buf: list = [None] * nbuf          # the tile landed in each buffer, ("loading", tile) while in flight
        self.inflight: list = []                # buffers whose TMA has not landed
        self.done: set = set()                  # (part, tile) reads completed: part "h0" / "h1" (halves), "s" (scores)
        self.reading: set = set()               # (buffer, part, tile) reads in progress
        self.exchange = [0, 0]                  # segments each warpgroup has finished

    def tma(self, st: int, tile) -> None:
        old = self.buf[st]
        if isinstance(old, tuple) and old and old[0] == "loading":
            raise AssertionError(f"TMA of {tile} into buffer {st} while {old[1]} is still landing there")
        if old is not None:
            missing = [p for p in ("h0", "h1", "s") if (p, old) not in self.done]
            if missing:
                raise AssertionError(f"TMA of {tile} into buffer {st} before {old}'s {missing} read it")
        if any(r[0] == st for r in self.reading):
            raise AssertionError(f"TMA of {tile} into buffer {st} under a read in progress")
        self.buf[st] = ("loading", tile)
        self.inflight.append(st)

    def land_one(self, k: int) -> None:
        st = self.inflight.pop(k)
        self.buf[st] = self.buf[st][1]
        self.land[st].c += 1

    def start(self, st: int, part: str, tile) -> None:
        if self.buf[st] != tile:
            raise AssertionError(f"read {part} of {tile} in buffer {st}, which holds {self.buf[st]}")
        self.reading.add((st, part, tile))

    def end(self, st: int, part: str, tile) -> None:
        if self.buf[st] != tile:
            raise AssertionError(f"read {part} of {tile} in buffer {st} ended over {self.buf[st]}")
        self.reading.remove((st, part, tile))
        self.done.add((part, tile))


def wg0(S: Sim, segs: list[int], EI: int, TE: int, WL1: int, mutate: bool):
    nbuf = S.nbuf
    it = 0
    for seg, n in enumerate(segs):
        # the first two tiles' copies, past the previous segment's exchange
        for i in range(min(n, nbuf)):
            S.tma((it + i) % nbuf, (seg, i))
        yield lambda g=it: S.land[g % nbuf].done((g // nbuf) & 1)
        S.start(it % nbuf, "s", (seg, 0))
        for r in range(0, n, 2):
            g = it + r
            st, st1 = g % nbuf, (g + 1) % nbuf
            if TE:      # its half of V(r) transposed under S(r)'s MMAs
                S.start(st, "h0", (seg, r))
                yield None
                S.end(st, "h0", (seg, r))
            S.end(st, "s", (seg, r))        # S(r) retired
            yield None                      # (its softmax, its hand-off)
            if mutate and EI and r + 2 < n:
                S.tma(st, (seg, r + 2))
            yield lambda g=g: S.rsrc[g % nbuf].done((g // nbuf) & 1)
            assert ("h1", (seg, r)) in S.done, f"rsrc of {(seg, r)} passed before WG1 read it"
            if not TE:
                S.start(st, "h0", (seg, r))
                yield None
                S.end(st, "h0", (seg, r))
            if EI and r + 2 < n and not mutate:
                S.tma(st, (seg, r + 2))
            if r + 1 < n:
                yield None                  # (its P.V of tile r retired, WG1's P waited for)
                if not EI and r + 2 < n:
                    S.tma(st, (seg, r + 2))
                yield lambda g=g + 1: S.rsrc[g % nbuf].done((g // nbuf) & 1)
                assert ("h1", (seg, r + 1)) in S.done and ("s", (seg, r + 1)) in S.done
                if WL1 == 0:
                    S.start(st1, "h0", (seg, r + 1))
                    yield None
                    S.end(st1, "h0", (seg, r + 1))
                else:
                    assert ("h0", (seg, r + 1)) in S.done
                if EI and r + 3 < n:
                    S.tma(st1, (seg, r + 3))
                yield None                  # (its P.V of tile r + 1 retired)
                if not EI and r + 3 < n:
                    S.tma(st1, (seg, r + 3))
                if r + 2 < n:
                    yield lambda g=g + 2: S.land[g % nbuf].done((g // nbuf) & 1)
                    S.start((g + 2) % nbuf, "s", (seg, r + 2))
        S.exchange[0] += 1
        yield lambda s=seg: S.exchange[1] > s
        it += n


def wg1(S: Sim, segs: list[int], WL1: int):
    nbuf = S.nbuf
    it = 0
    for seg, n in enumerate(segs):
        for r in range(0, n, 2):
            g = it + r
            st, st1 = g % nbuf, (g + 1) % nbuf
            yield lambda g=g: S.land[g % nbuf].done((g // nbuf) & 1)
            S.start(st, "h1", (seg, r))
            yield None
            S.end(st, "h1", (seg, r))
            S.rsrc[st].c += 1
            if r + 1 < n:
                yield lambda g=g + 1: S.land[g % nbuf].done((g // nbuf) & 1)
                S.start(st1, "s", (seg, r + 1))     # its scores issued
                S.start(st1, "h1", (seg, r + 1))
                yield None
                S.end(st1, "h1", (seg, r + 1))
                yield None                          # (WG0's P waited for)
                S.end(st1, "s", (seg, r + 1))       # its scores retired
                if WL1 == 0:
                    S.rsrc[st1].c += 1
                yield None                          # (its softmax, its hand-off, its P.V issued)
                if WL1:
                    S.start(st1, "h0", (seg, r + 1))    # V_L(r + 1) for WG0
                    yield None
                    S.end(st1, "h0", (seg, r + 1))
                    S.rsrc[st1].c += 1
        S.exchange[1] += 1
        yield lambda s=seg: S.exchange[0] > s
        it += n


def run(seed: int, segs: list[int], EI: int, TE: int, WL1: int, mutate: bool = False) -> None:
    rng = random.Random(seed)
    S = Sim(rng, 2)
    gens = [wg0(S, segs, EI, TE, WL1, mutate), wg1(S, segs, WL1)]
    preds: list = [None, None]
    alive = [True, True]
    steps = 0
    while any(alive):
        steps += 1
        if steps > 100000:
            raise Dead("too many steps")
        if S.inflight and rng.random() < 0.4:
            S.land_one(rng.randrange(len(S.inflight)))
            continue
        ready = [w for w in (0, 1) if alive[w] and (preds[w] is None or preds[w]())]
        if not ready:
            if S.inflight:
                S.land_one(0)
                continue
            raise Dead(f"deadlock segs={segs}")
        w = rng.choice(ready)
        try:
            preds[w] = next(gens[w])
        except StopIteration:
            alive[w] = False
            preds[w] = None
    assert not S.inflight, "a TMA issued for no reader"
    for seg, n in enumerate(segs):
        for i in range(n):
            for part in ("h0", "h1", "s"):
                assert (part, (seg, i)) in S.done, f"{(seg, i)} never read by {part}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mutate", action="store_true", help="EI's copy before the wait for WG1's read")
    ap.add_argument("--seeds", type=int, default=200)
    args = ap.parse_args(argv)
    bad = 0
    for EI, TE, WL1 in product((0, 1), repeat=3):
        for seed in range(args.seeds):
            rng = random.Random(seed * 8 + EI * 4 + TE * 2 + WL1)
            segs = [rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 13]) for _ in range(rng.randint(1, 4))]
            try:
                run(seed, segs, EI, TE, WL1, args.mutate)
            except (AssertionError, Dead) as err:
                bad += 1
                if bad < 6:
                    print("EI", EI, "TE", TE, "WL1", WL1, segs, type(err).__name__, err)
    print("failures", bad)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
