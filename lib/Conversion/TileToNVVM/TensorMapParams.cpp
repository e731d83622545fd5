//===- TensorMapParams.cpp - TMA tensor maps as by-value kernel params ----===//
//
// mark-tensor-map-params: the attributes of a kernel's tensor-map parameters
// that only an llvm.func kernel can carry (see the pass description).
//
//===----------------------------------------------------------------------===//

#include "tileopt/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tileopt {
#define GEN_PASS_DEF_MARKTENSORMAPPARAMS
#include "tileopt/Conversion/Passes.h.inc"
} // namespace tileopt

using namespace mlir;

namespace {

struct MarkTensorMapParams
    : tileopt::impl::MarkTensorMapParamsBase<MarkTensorMapParams> {
  void runOnOperation() override {
    getOperation().walk([&](LLVM::LLVMFuncOp func) {
      auto maps = func->getAttrOfType<ArrayAttr>("tile.tensor_maps");
      if (!maps)
        return;
      unsigned params = func.getNumArguments();
      if (maps.size() > params) {
        func.emitOpError("has ")
            << maps.size() << " tensor maps (tile.tensor_maps) but only "
            << params << " parameters";
        return signalPassFailure();
      }
      Builder b(func.getContext());
      for (unsigned i = params - maps.size(); i < params; ++i) {
        if (!isa<LLVM::LLVMPointerType>(func.getArgument(i).getType())) {
          func.emitOpError("tensor-map parameter ")
              << i << " is not a pointer: " << func.getArgument(i).getType();
          return signalPassFailure();
        }
        func.setArgAttr(
            i, LLVM::LLVMDialect::getByValAttrName(),
            TypeAttr::get(LLVM::LLVMArrayType::get(b.getI8Type(), 128)));
        func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                        b.getI64IntegerAttr(64));
        func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(),
                        b.getUnitAttr());
      }
    });
  }
};

} // namespace
