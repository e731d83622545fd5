//===- SourceChecks.cpp - input that upstream MLIR cannot parse -----------===//

#include "tileopt/SourceChecks.h"

#include "llvm/ADT/StringExtras.h"

using namespace tileopt;

std::optional<UnsupportedSyntax>
tileopt::findUnsupportedSyntax(llvm::StringRef source) {
  // `array<index: ...>`: DenseArrayAttr asks an index type for its bit width
  // (Type::getIntOrFloatBitWidth asserts).
  for (size_t at = source.find("array<"); at != llvm::StringRef::npos;
       at = source.find("array<", at + 1)) {
    llvm::StringRef rest = source.drop_front(at + 6).ltrim();
    if (!rest.consume_front("index"))
      continue;
    rest = rest.ltrim();
    if (rest.starts_with(":") || rest.starts_with(">"))
      return UnsupportedSyntax{
          at, "array<index: ...> attributes abort MLIR 22's parser; write "
              "array<i64: ...> instead"};
  }
  return std::nullopt;
}
