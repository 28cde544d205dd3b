"""Wall-clock timing shared by the GPU checks (run_checks.py, run_models.py)."""
import statistics
import time


def median_time(fn, reps, warmups=3):
    """Median wall time of `fn` (which synchronizes) over `reps` calls, after
    `warmups` calls."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
