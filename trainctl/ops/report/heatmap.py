"""Rank x step heat-maps of a timeline (MegaScale's straggler view): the grid behind the pictures.

One DuckDB scan per grid; steps are bucketed so a picture has at most `max_cols` columns and ranks
are kept whole (a 8,192-rank run is 8,192 rows of pixels). Cell value: the median per-step time of
the bucket in ms (the whole step, or one phase).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from trainctl.signals import TableLike

__all__ = ["Grid", "step_grid", "phases_of"]


@dataclass(frozen=True)
class Grid:
    title: str
    ranks: tuple[int, ...]
    first_step: int
    steps_per_col: int
    values_ms: np.ndarray  # (ranks, cols), NaN where a rank has no data

    @property
    def cols(self) -> int:
        return int(self.values_ms.shape[1])


def _con(timeline: TableLike) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register("timeline", timeline)
    return con


def phases_of(timeline: TableLike) -> list[str]:
    con = _con(timeline)
    try:
        return [r[0] for r in con.execute("SELECT DISTINCT phase FROM timeline ORDER BY 1").fetchall()]
    finally:
        con.close()


def step_grid(timeline: TableLike, phase: str | None = None, *, max_cols: int = 200) -> Grid | None:
    """The median per-step time per (rank, step bucket) of `phase`; None: the whole step (the
    `step` phase where the trainer records it, else the sum of every phase of the step)."""
    con = _con(timeline)
    try:
        have_step = con.execute("SELECT count(*) FROM timeline WHERE phase = 'step'").fetchone()[0] > 0
        if phase is None and have_step:
            phase = "step"
        where = "WHERE phase = ?" if phase else ""
        params = [phase] if phase else []
        per_step = f"SELECT rank, step, sum(duration_ns) AS d FROM timeline {where} GROUP BY rank, step"
        lo, hi = con.execute(f"SELECT min(step), max(step) FROM ({per_step})", params).fetchone()
        if lo is None:
            return None
        n_steps = int(hi - lo + 1)
        per_col = max(1, -(-n_steps // max_cols))
        rows = con.execute(
            f"SELECT rank, (step - {int(lo)}) // {per_col} AS c, median(d) / 1e6 FROM ({per_step}) GROUP BY 1, 2",
            params,
        ).fetchall()
    finally:
        con.close()
    ranks = sorted({int(r) for r, _, _ in rows})
    index = {r: i for i, r in enumerate(ranks)}
    cols = -(-n_steps // per_col)
    values = np.full((len(ranks), cols), np.nan)
    for r, c, v in rows:
        values[index[int(r)], int(c)] = v
    title = f"{phase or 'step'} time (ms), rank x step"
    return Grid(title, tuple(ranks), int(lo), per_col, values)
