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

#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

NB_MODULE(_site_initialize_0, m) {
  m.doc() = "Registers tileopt's dialects and passes";
  m.def(
      "register_dialects",
      [](MlirDialectRegistry registry) {
        tileoptRegisterAllDialects(registry);
      },
      "Adds tileopt's and upstream dialects to a registry.");
  m.def(
      "find_unsupported_syntax",
      [](const std::string &source)
          -> std::optional<std::pair<intptr_t, std::string>> {
        MlirStringRef message;
        intptr_t offset = tileoptFindUnsupportedSyntax(
            mlirStringRefCreate(source.data(), source.size()), &message);
        if (offset < 0)
          return std::nullopt;
        return std::make_pair(offset,
                              std::string(message.data, message.length));
      },
      "(byte offset, message) of the first construct in the IR text that "
      "upstream MLIR's parser aborts on, or None.");
  tileoptRegisterAllPasses();
}
