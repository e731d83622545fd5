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
  // `vector<4294967296x...>`: the LLVM dialect's ops build i1 vectors of the
  // same lanes with a 32-bit count (0 lanes: VectorType::get asserts). No
  // GPU value is anywhere near that large.
  for (size_t at = source.find("vector<"); at != llvm::StringRef::npos;
       at = source.find("vector<", at + 1)) {
    llvm::StringRef rest = source.drop_front(at + 7).ltrim();
    rest.consume_front("[");
    while (true) {
      llvm::StringRef digits = rest.take_while(llvm::isDigit);
      if (digits.empty())
        break;
      uint64_t lanes;
      if (digits.getAsInteger(10, lanes) || lanes >= (uint64_t(1) << 32))
        return UnsupportedSyntax{
            at, "vectors of 2^32 or more lanes abort MLIR 22's LLVM dialect "
                "(its i1 vectors count lanes in 32 bits)"};
      rest = rest.drop_front(digits.size());
      if (!rest.consume_front("x"))
        break;
      rest.consume_front("[");
    }
  }
  return std::nullopt;
}
