/*===- Registration.h - C API for tileopt's registration ----------*- C -*-===*/
/*                                                                            */
/* The C API through which the Python bindings register tileopt's dialects    */
/* and passes (they reach tileopt's C++ only through the C API).              */
/*                                                                            */
/*===----------------------------------------------------------------------===*/

#ifndef TILEOPT_C_REGISTRATION_H
#define TILEOPT_C_REGISTRATION_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Adds the upstream dialects, extensions, translations and the tile dialect
/// to `registry`.
MLIR_CAPI_EXPORTED void
tileoptRegisterAllDialects(MlirDialectRegistry registry);

/// Registers the upstream passes and tileopt's passes, once per process.
MLIR_CAPI_EXPORTED void tileoptRegisterAllPasses(void);

/// Looks in `source` for IR that upstream MLIR's parser aborts on
/// (tileopt/SourceChecks.h): returns the byte offset of the first such
/// construct and sets `*message` (a static string), or returns -1.
MLIR_CAPI_EXPORTED intptr_t
tileoptFindUnsupportedSyntax(MlirStringRef source, MlirStringRef *message);

#ifdef __cplusplus
}
#endif

#endif /* TILEOPT_C_REGISTRATION_H */
