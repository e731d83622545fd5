//===- SourceChecks.h - input that upstream MLIR cannot parse ---*- C++ -*-===//
//
// Upstream MLIR 22 aborts (an assertion in the parser, not a diagnostic) on
// a few spellings of valid-looking IR. tileopt cannot patch the pinned
// wheel, so every entry point that parses text (tileopt-opt, the Python
// compiler) looks for them first and reports an error instead.
//
//===----------------------------------------------------------------------===//

#ifndef TILEOPT_SOURCECHECKS_H
#define TILEOPT_SOURCECHECKS_H

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace tileopt {

/// Something in the source that upstream MLIR would abort on.
struct UnsupportedSyntax {
  /// Byte offset of the construct in the source.
  size_t offset;
  /// What it is and what to write instead.
  llvm::StringRef message;
};

/// The first construct of `source` that upstream MLIR's parser aborts on, if
/// any (docs/tile-dialect.md lists them).
std::optional<UnsupportedSyntax> findUnsupportedSyntax(llvm::StringRef source);

} // namespace tileopt

#endif // TILEOPT_SOURCECHECKS_H
