//===- tileopt-opt.cpp - tileopt's pass driver ----------------------------===//
//
// A thin MlirOptMain wrapper: every dialect, pass and translation comes from
// tileopt::registerAll*, shared with the C API and the Python bindings.
//
//===----------------------------------------------------------------------===//

#include "tileopt/Registration.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  tileopt::registerAllPasses();
  mlir::DialectRegistry registry;
  tileopt::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "tileopt pass driver\n", registry));
}
