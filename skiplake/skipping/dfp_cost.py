"""Whether dynamic file pruning pays for itself on one join: a cost model that needs no Spark.

Pruning a probe's files by a build side's keys saves reading the files it rules out. It costs
evaluating the build side first (read in the driver, or a Spark job) and applying the keys: a
final query that differs from the analysis pass, which Spark then analyses again. On small
tables the saving is a few milliseconds and the cost a fraction of a second, so a query there
would be slower than plain Spark; on a large probe the saving is seconds.

The model prices each in seconds from what is known before any build runs:

- the probe's scan: `(bytes + files * file_open_bytes) / (scan_bytes_per_second * parallelism)`
  over the files static pruning left it (each file counted as 4 MB more, as Spark's split
  planning counts it: spark.sql.files.openCostInBytes);
- what pruning can rule out, as the share of the probe it keeps: at best a single key's share
  (the average share of files a key value falls into, `file_overlap`), and for sure the share
  whose [min, max] meets the build's key range (from the build table's stats; 1 when the build
  key does not come from a lake table's column);
- the build: `local_build_seconds + rows * local_row_seconds` in the driver (its filter runs
  over every row of the table), or `build_job_seconds` as a Spark job, whose rows then take the
  build's place in the query (plus its bytes at the scan rate when they do not, `reused_builds`
  off: the query evaluates it again);
- applying it: `apply_seconds`, and the kept files may cost `filtered_scan_share` more per file
  than a plain read (none when the final plan reads them through a relation of their own, as it
  does but where the final query falls back to text with a filter on each row's file name).

A build is evaluated when what it saves for sure pays for it, or when its best case does and
the build is cheap next to the probe's scan (at most `speculative_share` of it, or
`speculative_seconds`): a build that then prunes nothing wastes at most that. Once the keys are known, the files they keep
are exact, and the pruning is applied only if it saves more than applying it costs.
The constants are measured by benchmarks/bench_dfp_cost.py (docs/dynamic-pruning.md gives them).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CostModel:
    """The constants of the cost model (see the module): throughputs, fixed costs in seconds, and shares."""
    parallelism: int = 2                        # tasks the probe's scan runs at once (Spark's defaultParallelism)
    scan_bytes_per_second: int = 700 << 20      # bytes of files one task gets through per second (scan and the work above it)
    file_open_bytes: int = 4 * 1024 * 1024      # a file costs as much as this many bytes more (Spark's openCostInBytes)
    build_job_seconds: float = 0.1              # a Spark job's fixed cost (scheduling, code generation, collect)
    local_build_seconds: float = 0.003          # a build read in the driver: fixed cost
    local_row_seconds: float = 80e-9            # ... and per row of its table
    reused_builds: bool = True                  # a Spark job's build also serves the query (it is not evaluated twice)
    apply_seconds: float = 0.02                 # a final query that differs from the analysis pass
    filtered_scan_share: float = 0.0            # the kept files cost this share more to read than a plain read
    speculative_share: float = 0.1              # a build whose saving is not sure costs at most this share of the scan
    speculative_seconds: float = 0.025          # ... or at most this long

    def scan_seconds(self, files: int, bytes_: int) -> float:
        """Seconds to scan `files` files of `bytes_` bytes in all (each file file_open_bytes more), over
        `parallelism` tasks."""
        return (bytes_ + files * self.file_open_bytes) / (self.scan_bytes_per_second * max(1, self.parallelism))

    def build_seconds(self, bytes_: int, rows: int, local: bool) -> float:
        """Seconds a build side costs: read in the driver (`local`, by the `rows` of its table), or as
        a Spark job (plus a scan of its `bytes_` when reused_builds is off)."""
        if local:
            return self.local_build_seconds + rows * self.local_row_seconds
        if self.reused_builds:
            # Its rows take its place in the query, which would have read them anyway.
            return self.build_job_seconds
        return self.scan_seconds(0, bytes_) + self.build_job_seconds

    def estimate(self, probe_files: int, probe_bytes: int, best_share: float, sure_share: float,
                 build_bytes: int, build_rows: int, build_local: bool) -> "CostEstimate":
        """The costs and savings of one build side for a probe static pruning left at `probe_files`
        and `probe_bytes`; `best_share` and `sure_share` (clamped to 0..1) are the shares of the probe
        one key keeps at best and the build's key range keeps for sure."""
        return CostEstimate(probe_files, probe_bytes, self.scan_seconds(probe_files, probe_bytes),
                            _share(best_share), _share(sure_share), build_bytes,
                            self.build_seconds(build_bytes, build_rows, build_local), build_local, self.apply_seconds,
                            self.speculative_allowance(probe_files, probe_bytes), self.filtered_scan_share)

    def speculative_allowance(self, files: int, bytes_: int) -> float:
        """What a build that may prune nothing may cost, for a probe of that size."""
        return max(self.speculative_share * self.scan_seconds(files, bytes_), self.speculative_seconds)


@dataclass(frozen=True)
class CostEstimate:
    """One build side's costs and savings, in seconds, before it is evaluated."""
    probe_files: int
    probe_bytes: int
    scan_s: float           # the probe's scan after static pruning
    best_share: float       # share of the probe one key keeps at best (its files' overlap)
    sure_share: float       # share the build's key range keeps, from stats (1: not known)
    build_bytes: int
    build_s: float
    build_local: bool       # read in the driver, not by a Spark job
    apply_s: float
    allowance_s: float      # what a build whose saving is not sure may cost
    filtered_share: float   # the kept files cost this share more to read

    @property
    def best_saving_s(self) -> float:
        """Seconds pruning saves at best: the probe's scan less the share one key keeps (and its extra cost)."""
        return self.scan_s * (1.0 - self.best_share * (1.0 + self.filtered_share))

    @property
    def sure_saving_s(self) -> float:
        """Seconds pruning saves for sure: the probe's scan less the share the build's key range keeps."""
        return self.scan_s * (1.0 - self.sure_share * (1.0 + self.filtered_share))

    @property
    def cost_s(self) -> float:
        """Seconds pruning costs: the build, and applying its keys."""
        return self.build_s + self.apply_s

    def worth_building(self) -> tuple[bool, str]:
        """(evaluate the build?, why not when it is not worth it)."""
        if self.sure_saving_s >= self.cost_s:
            return True, ""
        if self.best_saving_s < self.cost_s:
            return False, (f"by cost: pruning saves at most ~{_s(self.best_saving_s)} of the probe's scan "
                           f"({self.probe_files:,} files, {self.probe_bytes:,} bytes, ~{_s(self.scan_s)}), less "
                           f"than the build ~{_s(self.build_s)} ({self._where()}) + applying ~{_s(self.apply_s)}")
        if self.build_s > self.allowance_s:
            return False, (f"by cost: the build ~{_s(self.build_s)} ({self._where()}) is more than a build not sure to "
                           f"pay may cost (~{_s(self.allowance_s)} for a scan of ~{_s(self.scan_s)}), and its key range "
                           f"rules out {1 - self.sure_share:.0%} of it for sure, saving ~{_s(max(0.0, self.sure_saving_s))}")
        return True, ""

    def worth_filtering_rows(self) -> tuple[bool, str]:
        """For a build whose keys can only filter the probe's rows (its files are not clustered by
        the key): whether the build is cheap next to the probe's scan. How much the row filter
        saves (rows kept out of joins and shuffles) is not known before the keys are."""
        if self.build_s <= self.allowance_s:
            return True, ""
        return False, (f"by cost: its keys could only filter the probe's rows, and the build ~{_s(self.build_s)} "
                       f"({self._where()}) is more than a build not sure to pay may cost (~{_s(self.allowance_s)} "
                       f"for the probe's scan of ~{_s(self.scan_s)}: {self.probe_files:,} files, {self.probe_bytes:,} bytes)")

    def worth_applying(self, before: tuple[int, int], after: tuple[int, int],
                       model: CostModel) -> tuple[bool, str]:
        """Once the keys are known: whether the (files, bytes) they keep of the probe's save more
        than applying them costs."""
        saving = model.scan_seconds(*before) - model.scan_seconds(*after) * (1.0 + model.filtered_scan_share)
        if saving >= self.apply_s:
            return True, ""
        return False, (f"by cost after the build: its keys keep {after[0]:,} of {before[0]:,} files, saving "
                       f"~{_s(max(0.0, saving))}, less than applying ~{_s(self.apply_s)}")

    def text(self) -> str:
        """The estimate in one line, as explain's `cost:` line shows it."""
        return (f"probe {self.probe_files:,} files, {self.probe_bytes:,} bytes, scan ~{_s(self.scan_s)}; "
                f"one key keeps ~{self.best_share:.0%}, the build's key range {self.sure_share:.0%}; "
                f"build ~{_s(self.build_s)} ({self._where()}) + applying ~{_s(self.apply_s)}")

    def to_dict(self) -> dict:
        """The fields as a dict, with best_saving_s and sure_saving_s."""
        out = asdict(self)
        out.update(best_saving_s=self.best_saving_s, sure_saving_s=self.sure_saving_s)
        return out

    def _where(self) -> str:
        return "in the driver" if self.build_local else "a Spark job"


def combined_share(shares: list[tuple[float, int]]) -> float:
    """The share of several probe targets kept, weighted by their bytes ((share, bytes) each)."""
    total = sum(b for _s, b in shares)
    if total <= 0:
        return 1.0 if not shares else max(s for s, _b in shares)
    return sum(s * b for s, b in shares) / total


def _share(x: float) -> float:
    return min(1.0, max(0.0, x))


def _s(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
