//===- TileoptSiteInitialize.cpp - register tileopt in Python contexts ----===//
//
// The MLIR Python package imports `_site_initialize_0` at start-up: its
// `register_dialects` fills the registry that every new Context receives, so
// every context that tileopt makes knows the tile dialect and the upstream
// dialects, and importing it registers all passes for PassManager.parse.
//
//===----------------------------------------------------------------------===//

#include "tileopt-c/Registration.h"

#include "mlir/Bindings/Python/Nanobind.h"
#include "mlir/Bindings/Python/NanobindAdaptors.h"

NB_MODULE(_site_initialize_0, m) {
  m.doc() = "Registers tileopt's dialects and passes";
  m.def(
      "register_dialects",
      [](MlirDialectRegistry registry) { tileoptRegisterAllDialects(registry); },
      "Adds tileopt's and upstream dialects to a registry.");
  tileoptRegisterAllPasses();
}
