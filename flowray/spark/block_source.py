"""Arrow blocks as a source: :mod:`flowray.operators.arrow_blocks` (kept here under its
first name; the Spark plug-in's RayDP block store builds on it)."""

from flowray.operators.arrow_blocks import (
    ArrowBlockSource,
    BlockSplit,
    BlockStore,
    InMemoryBlockStore,
)

__all__ = ["BlockStore", "InMemoryBlockStore", "ArrowBlockSource", "BlockSplit"]
