// Binds the tile dialect's ODS for the generated Python op builders.
#ifndef TILEOPT_PYTHON_TILEOPS_TD
#define TILEOPT_PYTHON_TILEOPS_TD
include "tile/TileOps.td"
#endif
