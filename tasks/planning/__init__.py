"""Planning: what a run will compute (judge plan, configuration hash) and which partitions a backfill still needs."""

__all__: list[str] = []
