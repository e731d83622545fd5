//===- Registration.cpp - C API for tileopt's registration ----------------===//

#include "tileopt-c/Registration.h"

#include "tileopt/Registration.h"

#include "mlir/CAPI/IR.h"
#include "mlir/IR/DialectRegistry.h"

void tileoptRegisterAllDialects(MlirDialectRegistry registry) {
  tileopt::registerAllDialects(*unwrap(registry));
}

void tileoptRegisterAllPasses(void) {
  static bool registered = [] {
    tileopt::registerAllPasses();
    return true;
  }();
  (void)registered;
}
