//===- CheckNVPTXInput.cpp - IR the NVPTX back end cannot take ------------===//
//
// check-nvptx-input: diagnostics for LLVM-dialect IR that the LLVM dialect's
// verifiers accept but LLVM's translation or NVPTX back end aborts or hangs
// on (see the pass description).
//
//===----------------------------------------------------------------------===//

#include "tileopt/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMTypes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringExtras.h"

#include <limits>
#include <optional>

namespace tileopt {
#define GEN_PASS_DEF_CHECKNVPTXINPUT
#include "tileopt/Conversion/Passes.h.inc"
} // namespace tileopt

using namespace mlir;

namespace {

/// Address spaces with an NVPTX state space: generic, global, shared,
/// constant, local, shared::cluster, kernel parameters; the first five can
/// hold a module's variables.
constexpr unsigned kAddressSpaces[] = {0, 1, 3, 4, 5, 7, 101};
constexpr unsigned kVariableAddressSpaces[] = {0, 1, 3, 4, 5};

/// The most lanes of a vector: no per-thread value comes near it.
constexpr int64_t kMaxVectorLanes = 4096;

/// Why `type` (or a type in it) cannot reach NVPTX, or "".
std::string unfitType(Type type) {
  std::string why;
  type.walk([&](Type t) {
    if (!why.empty())
      return;
    if (auto ptr = dyn_cast<LLVM::LLVMPointerType>(t);
        ptr && !llvm::is_contained(kAddressSpaces, ptr.getAddressSpace()))
      why = "a pointer in address space " +
            std::to_string(ptr.getAddressSpace()) +
            ", which NVPTX has no state space for (0, 1, 3, 4, 5, 7, 101)";
    if (auto vector = dyn_cast<VectorType>(t);
        vector && vector.getNumElements() > kMaxVectorLanes)
      why = "a vector of " + std::to_string(vector.getNumElements()) +
            " lanes, more than the " + std::to_string(kMaxVectorLanes) +
            " NVPTX code generation takes";
  });
  return why;
}

/// The operands (outputs, then inputs) that `constraints` declares: its
/// entries but clobbers (`~{...}`).
unsigned constrainedOperands(StringRef constraints) {
  SmallVector<StringRef> entries;
  constraints.split(entries, ',', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  return llvm::count_if(
      entries, [](StringRef entry) { return !entry.trim().starts_with("~"); });
}

/// The first operand number of `text` (`$N` or `${N...}`, not `$$`) that is
/// not below `count`, if any.
std::optional<uint64_t> operandPastEnd(StringRef text, unsigned count) {
  for (size_t at = text.find('$'); at != StringRef::npos;
       at = text.find('$', at + 1)) {
    StringRef rest = text.drop_front(at + 1);
    if (rest.starts_with("$")) {
      ++at;
      continue;
    }
    rest.consume_front("{");
    StringRef digits = rest.take_while(llvm::isDigit);
    if (digits.empty())
      continue;
    uint64_t number;
    if (digits.getAsInteger(10, number)) // more than 64 bits
      return std::numeric_limits<uint64_t>::max();
    if (number >= count)
      return number;
  }
  return std::nullopt;
}

struct CheckNVPTXInput : tileopt::impl::CheckNVPTXInputBase<CheckNVPTXInput> {
  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](Operation *op) {
      if (failed(check(op))) {
        signalPassFailure();
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    (void)result;
  }

  LogicalResult check(Operation *op) {
    auto fail = [&](const std::string &why) {
      return op->emitOpError("has ") << why;
    };
    for (Type type :
         llvm::concat<const Type>(op->getOperandTypes(), op->getResultTypes()))
      if (std::string why = unfitType(type); !why.empty())
        return fail(why);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          if (std::string why = unfitType(arg.getType()); !why.empty())
            return fail(why);
    for (NamedAttribute attr : op->getAttrs()) {
      std::string why;
      attr.getValue().walk([&](Type t) {
        if (why.empty())
          why = unfitType(t);
      });
      if (!why.empty())
        return fail(why);
    }
    if (auto global = dyn_cast<LLVM::GlobalOp>(op);
        global &&
        !llvm::is_contained(kVariableAddressSpaces, global.getAddrSpace()))
      return fail("address space " + std::to_string(global.getAddrSpace()) +
                  ", which holds no NVPTX module variable (0, 1, 3, 4, 5)");
    if (auto cast = dyn_cast<LLVM::BitcastOp>(op)) {
      Type from = cast.getArg().getType(), to = cast.getType();
      llvm::TypeSize fromBits = LLVM::getPrimitiveTypeSizeInBits(from);
      llvm::TypeSize toBits = LLVM::getPrimitiveTypeSizeInBits(to);
      if (fromBits != toBits)
        return op->emitOpError("casts ")
               << from << " (" << fromBits.getKnownMinValue() << " bits) to "
               << to << " (" << toBits.getKnownMinValue()
               << " bits): a bitcast keeps the size";
    }
    if (auto inlineAsm = dyn_cast<LLVM::InlineAsmOp>(op)) {
      unsigned count = constrainedOperands(inlineAsm.getConstraints());
      if (std::optional<uint64_t> number =
              operandPastEnd(inlineAsm.getAsmString(), count))
        return op->emitOpError("names operand $")
               << *number << " in its text, but its constraints \""
               << inlineAsm.getConstraints() << "\" declare " << count;
    }
    return success();
  }
};

} // namespace
