//===- tileopt-opt.cpp - tileopt's pass driver ----------------------------===//
//
// A thin MlirOptMain wrapper: every dialect, pass and translation comes from
// tileopt::registerAll*, shared with the C API and the Python bindings. The
// input is checked for what upstream MLIR's parser aborts on before it is
// parsed (tileopt/SourceChecks.h).
//
//===----------------------------------------------------------------------===//

#include "tileopt/Registration.h"
#include "tileopt/SourceChecks.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  tileopt::registerAllPasses();
  mlir::DialectRegistry registry;
  tileopt::registerAllDialects(registry);
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "tileopt pass driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects() || config.shouldListPasses())
    return mlir::asMainReturnCode(mlir::MlirOptMain(
        llvm::outs(), llvm::MemoryBuffer::getMemBuffer(""), registry, config));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (std::optional<tileopt::UnsupportedSyntax> unsupported =
          tileopt::findUnsupportedSyntax(input->getBuffer())) {
    llvm::SourceMgr sources;
    const char *at = input->getBufferStart() + unsupported->offset;
    sources.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
    sources.PrintMessage(llvm::errs(), llvm::SMLoc::getFromPointer(at),
                         llvm::SourceMgr::DK_Error, unsupported->message);
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
