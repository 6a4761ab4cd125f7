"""A hand-written model of kernel_hopper_pp's mbarrier / buffer protocol (the ping-pong bf16 MLA decode kernel),
run under random interleavings of its two warpgroups and random TMA completion order, for each RELOAD x WG1_FIRST.

It checks the design, not the Gluon code (the model mirrors ``_pp_wg0`` / ``_pp_wg1`` by hand: change both
together): no deadlock, every MMA reads the tile, P and max it should (at issue and at retirement), no TMA
lands in a buffer part that an unretired MMA reads, the query is not reloaded under a reader, and the parity
waits never skip a phase (a skipped phase reads a wrong tile or deadlocks). The score MMAs' nine wgmma groups
are one group here. Partial-tile zeroing is not modelled. Seeded mutations of the schedule (a reload before the
retiring wait, an off-by-one phase) make it fail, which is how it was checked to check something.

    python benchmarks/probes/pp_protocol_model.py     # prints the failures (0 expected)
"""
from __future__ import annotations

import random

class Dead(Exception): pass

class Bar:
    def __init__(s, name): s.name, s.c, s.pending = name, 0, 0
    def done(s, parity): return (s.c % 2) != parity

class Sim:
    def __init__(s, rng, segs):
        s.rng = rng
        s.segs = segs  # list of n (tiles per segment)
        s.c = {(st, p): Bar(f"c{st}{p}") for st in range(2) for p in range(3)}
        s.q = Bar("q"); s.p = [Bar("p0"), Bar("p1")]; s.x = [Bar("x0"), Bar("x1")]
        s.buf = {(st, p): None for st in range(2) for p in range(3)}     # (seg, tile) landed
        s.inflight_tma = []     # (bar, part key, value)
        s.readers = {}          # part key -> set of (wg, id)
        s.psmem = None; s.msmem = [None, None]; s.lsmem = {}
        s.q_content = None
        s.groups = [[], []]        # per WG: list of (id, reads[list of (key, expected)])
        s.next_id = 0
        s.log = []

    # ---- primitives
    def tma(s, key, value, bar):
        for (w, i) in s.readers.get(key, set()):
            raise AssertionError(f"TMA into {key} while MMA {i} of WG{w} reads it")
        s.buf[key] = ("loading", value)
        bar.pending += 1
        s.inflight_tma.append((bar, key, value))

    def complete_some(s):
        if s.inflight_tma and s.rng.random() < 0.5:
            k = s.rng.randrange(len(s.inflight_tma))
            bar, key, value = s.inflight_tma.pop(k)
            s.buf[key] = value
            bar.pending -= 1
            if bar.pending == 0:
                bar.c += 1
            return True
        return False

    def mma(s, wg, reads):
        for key, exp in reads:
            got = s.buf[key] if key not in ("p", "q") else (s.psmem if key == "p" else s.q_content)
            assert got == exp, f"WG{wg} MMA reads {key}: {got} expected {exp}"
        i = s.next_id; s.next_id += 1
        s.groups[wg].append((i, reads))
        for key, _ in reads:
            s.readers.setdefault(key, set()).add((wg, i))

    def wait_mma(s, wg, n):
        while len(s.groups[wg]) > n:
            i, reads = s.groups[wg].pop(0)
            for key, exp in reads:
                got = s.buf[key] if key not in ("p", "q") else (s.psmem if key == "p" else s.q_content)
                assert got == exp, f"WG{wg} MMA {i} lost its operand {key}: {got} vs {exp}"
                s.readers[key].discard((wg, i))

    def write_p(s, wg, value):
        for (w, i) in s.readers.get("p", set()):
            raise AssertionError(f"WG{wg} writes P while MMA {i} of WG{w} reads it")
        s.psmem = value

# ---- the two warpgroups, as generators that yield a predicate to block on
def wg0(S, RELOAD):
    it = 0; p1_phase = 0
    for seg, n in enumerate(S.segs):
        for (w, i) in S.readers.get("q", set()):
            raise AssertionError("Q reload under a reading MMA")
        S.q_content = ("q", seg)
        s0 = it % 2
        S.tma((s0, 0), (seg, 0), S.c[(s0, 0)]); S.tma((s0, 2), (seg, 0), S.c[(s0, 2)])
        if n > 1: S.tma((1 - s0, 0), (seg, 1), S.c[(1 - s0, 0)])
        # (q_bar: modelled as immediate)
        for k in range((n + 1) // 2):
            r = 2 * k; g = it + r; st = g % 2; ph = (g // 2) & 1
            # scores: wait left, right, rope
            for part in (0, 1, 2):
                bar = S.c[(st, part)]
                yield lambda bar=bar, ph=ph: bar.done(ph)
            S.mma(0, [((st, 0), (seg, r)), ((st, 1), (seg, r)), ((st, 2), (seg, r)), ("q", ("q", seg))])
            # (9 groups modelled as one; wait(9) retires the older P.V)
            if RELOAD == 0 and k > 0:
                S.wait_mma(0, 1)
                if r + 1 < n: S.tma((1 - st, 0), (seg, r + 1), S.c[(1 - st, 0)])
            S.wait_mma(0, 0)
            if r + 2 < n: S.tma((st, 2), (seg, r + 2), S.c[(st, 2)])
            S.write_p(0, (seg, r)); S.msmem[0] = (seg, r)
            S.p[0].c += 1
            S.mma(0, [((st, 0), (seg, r))])     # own P from registers
            if r + 1 < n:
                S.wait_mma(0, 0)
                if r + 2 < n: S.tma((st, 0), (seg, r + 2), S.c[(st, 0)])
                bar = S.p[1]; ph1 = p1_phase
                yield lambda bar=bar, ph1=ph1: bar.done(ph1)
                p1_phase ^= 1
                assert S.msmem[1] == (seg, r + 1), ("m1", S.msmem[1], (seg, r + 1))
                S.mma(0, [("p", (seg, r + 1)), ((1 - st, 0), (seg, r + 1))])
                if RELOAD:
                    S.wait_mma(0, 0)
                    if r + 3 < n: S.tma((1 - st, 0), (seg, r + 3), S.c[(1 - st, 0)])
        S.wait_mma(0, 0)
        S.lsmem[(seg % 2, 0)] = seg
        S.x[0].c += 1
        bar = S.x[1]
        yield lambda bar=bar, seg=seg: bar.done(seg & 1)
        assert S.lsmem[(seg % 2, 1)] == seg
        it += n

def wg1(S, FIRST):
    it = 0; p0_phase = 0
    for seg, n in enumerate(S.segs):
        s0 = it % 2
        # wait for q of this segment: modelled by checking content when the MMA reads it (WG0 sets it first)
        S.tma((s0, 1), (seg, 0), S.c[(s0, 1)])
        if n > 1:
            S.tma((1 - s0, 1), (seg, 1), S.c[(1 - s0, 1)]); S.tma((1 - s0, 2), (seg, 1), S.c[(1 - s0, 2)])
        yield lambda seg=seg: S.q_content == ("q", seg)
        for k in range((n + 1) // 2):
            r = 2 * k; g = it + r; st = g % 2; pho = ((g + 1) // 2) & 1
            S.wait_mma(1, 0)
            if r + 1 < n:
                if k > 0: S.tma((1 - st, 1), (seg, r + 1), S.c[(1 - st, 1)])
                for part in (0, 1, 2):
                    bar = S.c[(1 - st, part)]
                    yield lambda bar=bar, pho=pho: bar.done(pho)
                S.mma(1, [((1 - st, 0), (seg, r + 1)), ((1 - st, 1), (seg, r + 1)), ((1 - st, 2), (seg, r + 1)),
                          ("q", ("q", seg))])
                bar, ph0 = S.p[0], p0_phase
                yield lambda bar=bar, ph0=ph0: bar.done(ph0)
                p0_phase ^= 1
                assert S.msmem[0] == (seg, r)
                if FIRST:
                    S.wait_mma(1, 0)
                    if r + 3 < n: S.tma((1 - st, 2), (seg, r + 3), S.c[(1 - st, 2)])
                    assert S.psmem == (seg, r)      # read P(r) back
                    S.write_p(1, (seg, r + 1)); S.msmem[1] = (seg, r + 1)
                    S.p[1].c += 1
                    S.mma(1, [((st, 1), (seg, r))])
                    S.mma(1, [((1 - st, 1), (seg, r + 1))])
                    S.wait_mma(1, 1)
                    if r + 2 < n: S.tma((st, 1), (seg, r + 2), S.c[(st, 1)])
                else:
                    S.mma(1, [("p", (seg, r)), ((st, 1), (seg, r))])
                    S.wait_mma(1, 1)
                    if r + 3 < n: S.tma((1 - st, 2), (seg, r + 3), S.c[(1 - st, 2)])
                    S.wait_mma(1, 0)
                    if r + 2 < n: S.tma((st, 1), (seg, r + 2), S.c[(st, 1)])
                    S.write_p(1, (seg, r + 1)); S.msmem[1] = (seg, r + 1)
                    S.p[1].c += 1
                    S.mma(1, [((1 - st, 1), (seg, r + 1))])
            else:
                bar, ph0 = S.p[0], p0_phase
                yield lambda bar=bar, ph0=ph0: bar.done(ph0)
                p0_phase ^= 1
                assert S.msmem[0] == (seg, r)
                S.mma(1, [("p", (seg, r)), ((st, 1), (seg, r))])
        S.wait_mma(1, 0)
        S.lsmem[(seg % 2, 1)] = seg
        S.x[1].c += 1
        bar = S.x[0]
        yield lambda bar=bar, seg=seg: bar.done(seg & 1)
        assert S.lsmem[(seg % 2, 0)] == seg
        it += n

def run(seed, segs, RELOAD, FIRST):
    rng = random.Random(seed)
    S = Sim(rng, segs)
    gens = [wg0(S, RELOAD), wg1(S, FIRST)]
    preds = [None, None]; alive = [True, True]
    steps = 0
    while any(alive):
        steps += 1
        if steps > 200000: raise Dead("too many steps")
        if S.complete_some(): continue
        ready = [w for w in (0, 1) if alive[w] and (preds[w] is None or preds[w]())]
        if not ready:
            if S.inflight_tma:
                # nothing runnable: some TMA must land
                bar, key, value = S.inflight_tma.pop(0); S.buf[key] = value; bar.pending -= 1
                if bar.pending == 0: bar.c += 1
                continue
            raise Dead(f"deadlock segs={segs} seed={seed} preds")
        w = rng.choice(ready)
        try:
            preds[w] = next(gens[w])
        except StopIteration:
            alive[w] = False; preds[w] = None
    assert not S.inflight_tma

if __name__ == "__main__":
    bad = 0
    for RELOAD in (0, 1):
        for FIRST in (0, 1):
            for seed in range(300):
                rng = random.Random(seed * 7 + RELOAD * 3 + FIRST)
                segs = [rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 13]) for _ in range(rng.randint(1, 4))]
                try:
                    run(seed, segs, RELOAD, FIRST)
                except (AssertionError, Dead) as e:
                    bad += 1
                    if bad < 6: print("RELOAD", RELOAD, "FIRST", FIRST, segs, type(e).__name__, e)
    print("failures", bad)
