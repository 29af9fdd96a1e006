"""bt-get's bytes per source over time (btget/display/result.py: SourceLog): bounded, ordered, ending at the end."""

from __future__ import annotations

from btget.display.result import SourceLog


def test_samples_are_kept_at_most_once_an_interval_and_the_end_is_last():
    log = SourceLog(interval=1.0)
    for k in range(31):  # every 0.1 s for 3 s
        log.sample(k / 10, {"a": k * 100})
    samples = log.finish(3.05, {"a": 3100, "b": 5})
    assert [t for t, _ in samples] == [0.0, 1.0, 2.0, 3.0, 3.05]
    assert samples[-1] == (3.05, {"a": 3100, "b": 5}) and samples[1] == (1.0, {"a": 1000})


def test_a_long_run_keeps_its_whole_span_in_at_most_max_samples():
    log = SourceLog(interval=1.0, max_samples=100)
    for t in range(10_000):
        log.sample(float(t), {"a": t})
    samples = log.finish(10_000.0, {"a": 10_000})
    assert len(samples) <= 101
    assert samples[0][0] == 0.0 and samples[-1] == (10_000.0, {"a": 10_000})
    steps = [b[0] - a[0] for a, b in zip(samples, samples[1:])]
    assert max(steps) <= 2 * min(steps[:-1]) + 1e-9 and max(steps) <= 256  # evenly thinned


def test_the_end_replaces_a_sample_taken_at_the_same_moment():
    log = SourceLog()
    log.sample(0.0, {})
    assert log.finish(0.0, {"a": 1}) == [(0.0, {"a": 1})]
