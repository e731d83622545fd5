"""Python builders for the tile dialect, generated from its ODS."""

from ._tile_enum_gen import *  # noqa: F403
from ._tile_ops_gen import *  # noqa: F403
