//===- InsertCompression.cpp - AdaTopK on the slowest links ---------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Format/WireCodec.h"
#include "dtfm/Passes/Passes.h"
#include "dtfm/Planner/Compression.h"

#include "mlir/IR/Builders.h"

#include <map>

namespace mlir::dtfm {
#define GEN_PASS_DEF_INSERTCOMPRESSION
#include "dtfm/Passes/Passes.h.inc"
} // namespace mlir::dtfm

using namespace mlir;
using namespace mlir::dtfm;
namespace planner = ::dtfm::planner;

namespace {
struct InsertCompression
    : public mlir::dtfm::impl::InsertCompressionBase<InsertCompression> {
  using InsertCompressionBase::InsertCompressionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<planner::CodecChoice> linkCodec = planner::parseCodecChoice(
        int8.getValue(), planner::CodecUse::PipelineTransfers);
    if (!linkCodec) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-insert-compression: unknown int8 '" << int8.getValue()
          << "' (expected "
          << planner::codecChoices(planner::CodecUse::PipelineTransfers) << ")";
      return signalPassFailure();
    }
    // Without a codec on the links, top-k is the point: a ratio above 1.
    bool topkOnly = !linkCodec->mayCompress();
    bool ratioOk = topkOnly ? ratio > 1 : ratio >= 1;
    if (!(ratioOk && ratio < 1e9) || !(denseBelow >= 0)) {
      mlir::emitError(toolLoc(module, ""))
          << "dtfm-insert-compression: ratio must be "
          << (topkOnly ? "> 1" : ">= 1")
          << " and dense-below >= 0, got " << ratio.getValue() << " and "
          << denseBelow.getValue();
      return signalPassFailure();
    }
    SmallVector<SendOp> sends;
    std::map<int64_t, RecvOp> recvOfTag;
    int64_t nextTag = 0;
    module.walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op)) {
        // Parameters (and their gradients) that move once per iteration are
        // not activations: top-k does not apply to weights.
        if (!send->hasAttr(kOncePerIterationAttrName))
          sends.push_back(send);
        nextTag = std::max<int64_t>(nextTag, send.getTag() + 1);
      } else if (auto recv = dyn_cast<RecvOp>(op)) {
        recvOfTag[recv.getTag()] = recv;
        nextTag = std::max<int64_t>(nextTag, recv.getTag() + 1);
      }
    });
    std::vector<planner::LinkTransfer> links;
    for (SendOp send : sends) {
      auto type = cast<ShapedType>(send.getValue().getType());
      links.push_back(
          {static_cast<double>(send.getBytes()),
           send.getLatencyS().convertToDouble(),
           send.getBandwidthGbps().convertToDouble(),
           std::max(1.0, double(type.getElementTypeBitWidth()) / 8)});
    }
    planner::CompressionOptions options;
    options.targetRatio = std::max(1.0, ratio.getValue());
    options.uniform = uniform;
    options.denseBelow = denseBelow;
    options.linkCodec = *linkCodec;
    std::vector<planner::LinkCompression> plan =
        planner::planCompression(links, options);

    Builder b(module.getContext());
    for (auto [send, compression] : llvm::zip(sends, plan)) {
      bool encoded = compression.wire != ::dtfm::format::WireCodec::Dense;
      if (!compression.compressed && !encoded)
        continue;
      auto it = recvOfTag.find(send.getTag());
      if (it == recvOfTag.end()) {
        send.emitOpError() << "has no recv with tag " << send.getTag()
                           << "; run --dtfm-verify-plan";
        return signalPassFailure();
      }
      RecvOp recv = it->second;
      if (encoded) {
        // The same transfer in the codec's format: its bytes on the wire.
        const ::dtfm::format::WireCodecInfo &codec =
            ::dtfm::format::wireCodecInfo(compression.wire);
        size_t numel = static_cast<size_t>(
            cast<RankedTensorType>(send.getValue().getType()).getNumElements());
        auto bytes = b.getI64IntegerAttr(
            static_cast<int64_t>(codec.messageBytes(numel, numel)));
        send.setBytesAttr(bytes);
        recv.setBytesAttr(bytes);
        for (Operation *op : {send.getOperation(), recv.getOperation()})
          op->setAttr(kWireAttrName, b.getStringAttr(codec.name));
        ++numInt8;
        continue;
      }
      auto dense = cast<RankedTensorType>(send.getValue().getType());
      int64_t numel = dense.getNumElements();
      int64_t k =
          std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(numel) /
                                                    compression.ratio));
      auto valuesType = RankedTensorType::get({k}, dense.getElementType());
      auto indicesType = RankedTensorType::get(
          {k}, b.getIntegerType(static_cast<unsigned>(8 * planner::kTopkIndexBytes)));
      int64_t indexTag = nextTag++;
      Attribute sendStage = send->getAttr(kStageAttrName);
      Attribute recvStage = recv->getAttr(kStageAttrName);
      auto transfer = [&](OpBuilder &builder, Value value, int64_t tag) {
        auto op = builder.create<SendOp>(
            send.getLoc(), value, send.getPeerAttr(), b.getI64IntegerAttr(tag),
            b.getI64IntegerAttr(getTensorBytes(value.getType())),
            send.getLatencySAttr(), send.getBandwidthGbpsAttr());
        if (sendStage)
          op->setAttr(kStageAttrName, sendStage);
      };
      auto receive = [&](OpBuilder &builder, Type type, int64_t tag) {
        auto op = builder.create<RecvOp>(
            recv.getLoc(), type, recv.getPeerAttr(), b.getI64IntegerAttr(tag),
            b.getI64IntegerAttr(getTensorBytes(type)), recv.getLatencySAttr(),
            recv.getBandwidthGbpsAttr());
        if (recvStage)
          op->setAttr(kStageAttrName, recvStage);
        return op.getResult();
      };

      OpBuilder atSend(send);
      auto compress = atSend.create<TopKCompressOp>(
          send.getLoc(), valuesType, indicesType, send.getValue(),
          b.getI64IntegerAttr(k));
      compress->setAttr(kRatioAttrName, b.getF64FloatAttr(compression.ratio));
      if (sendStage)
        compress->setAttr(kStageAttrName, sendStage);
      transfer(atSend, compress.getValues(), send.getTag());
      transfer(atSend, compress.getIndices(), indexTag);

      OpBuilder atRecv(recv);
      Value values = receive(atRecv, valuesType, recv.getTag());
      Value indices = receive(atRecv, indicesType, indexTag);
      auto decompress = atRecv.create<TopKDecompressOp>(recv.getLoc(), dense,
                                                        values, indices);
      if (recvStage)
        decompress->setAttr(kStageAttrName, recvStage);
      recv.getResult().replaceAllUsesWith(decompress.getResult());
      recv.erase();
      send.erase();
      ++numCompressed;
    }
  }
};
} // namespace
