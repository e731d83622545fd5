// The row-softmax example of docs/tile-dialect.md parses and verifies, so the
// page cannot rot.
// RUN: sed -n '/^```mlir$/,/^```$/p' %S/../../../docs/tile-dialect.md | sed '/^```/d' | tileopt-opt | FileCheck %s
// CHECK: tile.kernel @softmax
// CHECK: tile.launch @softmax
