//===- FusePatterns.h - PyTorch's decompositions back into fused ops ------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_TARGET_ONNX_FUSEPATTERNS_H
#define DTFM_LIB_TARGET_ONNX_FUSEPATTERNS_H

#include <string>
#include <vector>

namespace onnx {
class GraphProto;
} // namespace onnx

namespace mlir::dtfm {

/// Replaces LayerNorm, GELU, Linear (MatMul + Add), embedding (Gather) and
/// causal self-attention chains with nodes of the op types "dtfm.LayerNorm",
/// "dtfm.Gelu", "dtfm.Linear", "dtfm.Embedding" and "dtfm.CausalAttention"
/// (see FusePatterns.cpp); returns how many. `remarks` receives one line
/// per attention-like chain (MatMul, scaling and masking, Softmax, MatMul)
/// left unfused, saying which part of the pattern did not match.
int fuseOnnxPatterns(onnx::GraphProto &graph,
                     std::vector<std::string> *remarks = nullptr);

/// Rewrites each Einsum that is a batched matrix product ("<batch>ik,
/// <batch>kj-><batch>ij", or with "<batch>jk" a Transpose of its last two
/// axes first) as MatMul, before shape inference (which may not know
/// Einsum). Any other equation: false with a one-line reason in `error`.
bool lowerEinsums(onnx::GraphProto &graph, std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_LIB_TARGET_ONNX_FUSEPATTERNS_H
