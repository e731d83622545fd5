//===- Registration.h - register everything tileopt uses --------*- C++ -*-===//
//
// One place that registers the dialects, extensions, passes and translations
// that tileopt uses. The opt tool, the C API and the Python bindings all call
// it, so they accept the same IR and run the same pipelines.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_REGISTRATION_H
#define TILEOPT_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace tileopt {

/// Registers the upstream dialects, their extensions (ToLLVM interfaces, NVVM
/// target models), the LLVM IR translations and the tile dialect.
void registerAllDialects(mlir::DialectRegistry &registry);

/// Registers the upstream passes and tileopt's own passes and pipelines.
void registerAllPasses();

} // namespace tileopt

#endif // TILEOPT_REGISTRATION_H
