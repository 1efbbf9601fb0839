//===- ExternalData.h - ONNX tensors stored beside the model ---*- C++ -*-===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// ONNX keeps a model's tensors in files beside it when the model is over
// protobuf's 2 GB (torch.onnx.export does so by itself, onnx.save_model with
// save_as_external_data): a tensor then names a `location` relative to the
// model's folder, an `offset` and a `length`. The location comes from the
// model -- a hostile one may name ../../etc/shadow or a symbolic link out of
// the folder -- so every one is checked once, at load, and made absolute;
// the readers of tensor data (FoldConstants.h) then read exactly the bytes
// the tensor's dims say.
//
//===----------------------------------------------------------------------===//

#ifndef DTFM_LIB_TARGET_ONNX_EXTERNALDATA_H
#define DTFM_LIB_TARGET_ONNX_EXTERNALDATA_H

#include <cstdint>
#include <string>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace mlir::dtfm {

/// Checks every tensor of `model` with external data (initializers, node
/// attributes, subgraphs): its keys (location, offset, length, checksum;
/// the checksum is not verified), a location that is relative, free of
/// "..", and inside `modelDir` once symbolic links are followed, a regular
/// file, offset and length in decimal within it, and a length equal to
/// the tensor's bytes, and regions of one file that no two tensors share.
/// Each file is opened once, here, and what was opened is what is checked;
/// each location becomes that descriptor (/proc/self/fd/N, held open for
/// the process's life) with offset and length written out; integer and
/// bool tensors of at most `inlineBytes` are read in (ONNX's shape
/// inference reads shapes from them). False with a one-line `error` naming the tensor.
bool resolveExternalData(onnx::ModelProto &model, const std::string &modelDir,
                         int64_t inlineBytes, std::string &error);

/// The bytes of a tensor that resolveExternalData resolved, into `bytes`;
/// false with `error` ("has external data that cannot be read: ...").
bool readExternalData(const onnx::TensorProto &t, std::string &bytes,
                      std::string &error);

} // namespace mlir::dtfm

#endif // DTFM_LIB_TARGET_ONNX_EXTERNALDATA_H
