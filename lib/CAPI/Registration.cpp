//===- Registration.cpp - C API for tileopt's registration ----------------===//

#include "tileopt-c/Registration.h"

#include "tileopt/Registration.h"
#include "tileopt/SourceChecks.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Support.h"
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

intptr_t tileoptFindUnsupportedSyntax(MlirStringRef source,
                                      MlirStringRef *message) {
  std::optional<tileopt::UnsupportedSyntax> found =
      tileopt::findUnsupportedSyntax(unwrap(source));
  if (!found)
    return -1;
  *message = wrap(found->message);
  return found->offset;
}
