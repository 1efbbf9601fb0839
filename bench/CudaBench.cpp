//===- CudaBench.cpp - The CUDA kernels against the device's limits -------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
//   bench-cuda [--json] [--elements N] [--size M] [--seq S] [--reps R]
//
// On the first CUDA device, side by side in one run:
//
//   elementwise  add, gelu, accumulate and the AdamW step over N floats:
//                bytes moved per second vs the device's peak memory
//                bandwidth (2 x memory clock x bus width);
//   matmul       M x M x M through cuBLASLt in fp32, fp16 and bf16 (fp32
//                accumulation): TFLOP/s (compare with the chip's datasheet
//                peak; the runtime cannot query it);
//   topk         AdaTopK's select of 1% of N floats: input GB/s
//                (torch.topk on the same tensor needs a CUDA PyTorch, which
//                Debian's python3-torch is not: run it where there is one);
//   codec        a compressed exchange's encoding on the device with error
//                feedback: int8 (per-256 scales) and top-k 1% of N floats,
//                GB/s of the gradient and residual moved vs the peak;
//   attention    causal attention's forward and backward at GPT-2 small's
//                shape (8 sequences of S tokens, 12 heads of 64): the
//                unfused kernels (cuBLASLt products, the probabilities in
//                memory) beside the fused ones in f32 and on tensor cores in
//                f16 and bf16; TFLOP/s by FlashAttention's count (a causal
//                forward 2 b h S^2 d, the backward 2.5 times that).
//
// Without a device it says so and exits 0: nothing to measure.
//
//===----------------------------------------------------------------------===//

#include "BenchSupport.h"

#include "dtfm/Format/Int8.h"
#include "dtfm/Runtime/Cuda/Attention.h"
#include "dtfm/Runtime/Cuda/Device.h"
#include "dtfm/Runtime/Cuda/Kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

using namespace dtfm::runtime;

namespace {

struct Row {
  std::string bench, what;
  double seconds = 0;
  double rate = 0; ///< GB/s or TFLOP/s
  const char *unit = "GB/s";
  double ofPeak = 0; ///< fraction of the peak, 0 when unknown
};

/// Median seconds of `reps` runs of `body` on `stream` (after one warm-up).
double timeIt(cudaStream_t stream, int reps,
              const std::function<void()> &body) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  body();
  std::vector<float> ms;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(start, stream);
    body();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float elapsed = 0;
    cudaEventElapsedTime(&elapsed, start, stop);
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e-3;
}

} // namespace

int main(int argc, char **argv) {
  bool json = false;
  int64_t n = int64_t(1) << 26;
  int64_t size = 8192;
  int64_t seq = 1024;
  int reps = 20;
  dtfm::bench::Flags flags("bench-cuda", argc, argv);
  while (flags.next())
    if (flags.is("--json"))
      json = true;
    else if (flags.is("--elements"))
      n = flags.integer<int64_t>(1024);
    else if (flags.is("--size"))
      size = flags.integer<int64_t>(64);
    else if (flags.is("--seq"))
      seq = flags.integer<int64_t>(16);
    else if (flags.is("--reps"))
      reps = flags.integer<int>(1);
    else
      flags.unknown();
  std::string why;
  if (cuda::deviceCount(&why) == 0) {
    if (json)
      std::printf("{\"bench\":\"cuda\",\"skipped\":\"no CUDA device (%s)\"}\n",
                  why.c_str());
    else
      std::printf("bench-cuda: no CUDA device (%s): nothing to measure\n",
                  why.c_str());
    return 0;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  int memoryClockKHz = 0, busBits = 0;
  cudaDeviceGetAttribute(&memoryClockKHz, cudaDevAttrMemoryClockRate, 0);
  cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, 0);
  double peakBandwidth = 2.0 * memoryClockKHz * 1e3 * busBits / 8;
  cudaStream_t stream;
  cudaStreamCreate(&stream);

  std::vector<Row> rows;
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cuda::DeviceBuffer a(bytes), b(bytes), c(bytes), d(bytes);
  if (!a || !b || !c || !d) {
    std::fprintf(stderr, "bench-cuda: error: cannot allocate 4 x %zu bytes\n",
                 bytes);
    return 1;
  }
  // Values in a sane range (gelu, AdamW's sqrt).
  std::vector<float> host(n);
  for (int64_t i = 0; i < n; ++i)
    host[i] = static_cast<float>((i * 2654435761u) % 1000) / 500.0f - 1;
  cudaMemcpy(a.data(), host.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(b.data(), host.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemset(c.data(), 0, bytes);
  cudaMemset(d.data(), 0, bytes);

  auto elementwise = [&](const char *what, double bytesMoved,
                         const std::function<void()> &body) {
    double s = timeIt(stream, reps, body);
    Row r{"elementwise",        what,   s,
          bytesMoved / s / 1e9, "GB/s", bytesMoved / s / peakBandwidth};
    rows.push_back(r);
  };
  elementwise("add (2 reads, 1 write)", 3.0 * bytes, [&] {
    cuda::addRepeated(a.floats(), n, b.floats(), n, c.floats(), n, stream);
  });
  elementwise("gelu (1 read, 1 write)", 2.0 * bytes,
              [&] { cuda::gelu(a.floats(), c.floats(), n, false, stream); });
  elementwise("accumulate (2 reads, 1 write)", 3.0 * bytes,
              [&] { cuda::accumulate(a.floats(), c.floats(), n, stream); });
  elementwise("adamw step (4 reads, 3 writes)", 7.0 * bytes, [&] {
    cuda::adamwStep(c.floats(), a.floats(), b.floats(), d.floats(), n, 1, 1e-9f,
                    0.9, 0.999, 1e-8f, 0.0f, 0, stream);
  });

  // Matmuls.
  cuda::Matmul matmul;
  size_t matBytes = static_cast<size_t>(size) * size * sizeof(float);
  cuda::DeviceBuffer ma(matBytes), mb(matBytes), mc(matBytes);
  if (ma && mb && mc) {
    cudaMemset(ma.data(), 0, matBytes);
    cudaMemset(mb.data(), 0, matBytes);
    struct Variant {
      cuda::ElementType type;
      bool floatOutput;
      const char *name;
    };
    for (auto [type, floatOutput, name] :
         {Variant{cuda::ElementType::F32, false, "fp32"},
          Variant{cuda::ElementType::F16, false, "fp16 (fp32 accumulate)"},
          Variant{cuda::ElementType::BF16, false, "bf16 (fp32 accumulate)"},
          // What the executor runs for f16/bf16 plans (rounding excluded).
          Variant{cuda::ElementType::BF16, true, "bf16 in, fp32 out"}}) {
      cuda::MatmulShape s;
      s.m = s.n = s.k = size;
      s.type = type;
      s.floatOutput = floatOutput;
      std::string error;
      bool ok = true;
      double seconds = timeIt(stream, reps, [&] {
        ok =
            ok && matmul.run(s, ma.data(), mb.data(), mc.data(), stream, error);
      });
      if (!ok) {
        std::fprintf(stderr, "bench-cuda: matmul %s: %s\n", name,
                     error.c_str());
        continue;
      }
      double flops = 2.0 * size * size * size;
      rows.push_back({"matmul",
                      std::string(name) + " " + std::to_string(size) + "^3",
                      seconds, flops / seconds / 1e12, "TFLOP/s", 0});
    }
  }

  // AdaTopK selection: 1% of n.
  int64_t k = std::max<int64_t>(1, n / 100);
  cuda::DeviceBuffer values(k * sizeof(float)), indices(k * sizeof(float)),
      workspace(cuda::topKWorkspaceBytes(n));
  if (values && indices && workspace) {
    double s = timeIt(stream, reps, [&] {
      cuda::topK(a.floats(), n, k, values.floats(), indices.floats(),
                 workspace.data(), stream);
    });
    rows.push_back({"topk", "select 1% of " + std::to_string(n), s,
                    bytes / s / 1e9, "GB/s", bytes / s / peakBandwidth});
  }

  // Compressed exchanges encoded on the device (error feedback): bytes of
  // the gradient and the residual read and the residual written per second
  // (int8 also writes its message, n + n / 64 bytes).
  cuda::DeviceBuffer message(dtfm::format::int8Bytes(static_cast<size_t>(n)) + 4),
      exactIndices(k * sizeof(uint32_t));
  if (message && values && exactIndices && workspace) {
    double s = timeIt(stream, reps, [&] {
      cuda::int8WithFeedback(a.floats(), d.floats(), n, message.data(),
                             stream);
    });
    double moved = 3.0 * bytes + dtfm::format::int8Bytes(static_cast<size_t>(n));
    rows.push_back({"codec", "int8 with feedback, " + std::to_string(n), s,
                    moved / s / 1e9, "GB/s", moved / s / peakBandwidth});
    s = timeIt(stream, reps, [&] {
      cuda::topKWithFeedback(a.floats(), d.floats(), n, k, values.floats(),
                             static_cast<uint32_t *>(exactIndices.data()),
                             workspace.data(), stream);
    });
    rows.push_back({"codec", "top-k 1% with feedback, " + std::to_string(n),
                    s, 3.0 * bytes / s / 1e9, "GB/s",
                    3.0 * bytes / s / peakBandwidth});
  }

  // Causal attention, forward and backward, unfused and fused.
  {
    cuda::AttentionShape shape{8, seq, 768, 12, 12};
    int64_t values = shape.batch * shape.seq * shape.hidden;
    size_t valueBytes = static_cast<size_t>(values) * sizeof(float);
    cuda::DeviceBuffer aq(valueBytes), ak(valueBytes), av(valueBytes),
        ado(valueBytes), aout(valueBytes), adq(valueBytes), adk(valueBytes),
        adv(valueBytes),
        probs(static_cast<size_t>(shape.batch * shape.heads * shape.seq *
                                  shape.seq) *
              sizeof(float)),
        scratch(static_cast<size_t>(shape.scratchFloats()) * sizeof(float));
    if (aq && ak && av && ado && aout && adq && adk && adv && probs &&
        scratch) {
      std::vector<float> input(static_cast<size_t>(values));
      for (size_t i = 0; i < input.size(); ++i)
        input[i] = static_cast<float>((i * 2654435761u) % 2000) / 1000.0f - 1;
      for (cuda::DeviceBuffer *t : {&aq, &ak, &av, &ado})
        cudaMemcpy(t->data(), input.data(), valueBytes,
                   cudaMemcpyHostToDevice);
      double flops = 3.5 * 2.0 * shape.batch * shape.heads * shape.seq *
                     shape.seq * shape.headDim();
      std::string dims = std::to_string(shape.batch) + "x" +
                         std::to_string(shape.heads) + "x" +
                         std::to_string(shape.seq) + "x" +
                         std::to_string(shape.headDim());
      cuda::Matmul attentionMatmul;
      std::string error;
      bool ok = true;
      double s = timeIt(stream, reps, [&] {
        ok = ok &&
             cuda::causalAttention(attentionMatmul, shape, aq.floats(),
                                   ak.floats(), av.floats(), aout.floats(),
                                   probs.floats(), scratch.floats(), stream,
                                   error) &&
             cuda::causalAttentionProbabilities(attentionMatmul, shape,
                                                aq.floats(), ak.floats(),
                                                probs.floats(), scratch.floats(),
                                                stream, error) &&
             cuda::causalAttentionBackward(
                 attentionMatmul, shape, aq.floats(), ak.floats(), av.floats(),
                 probs.floats(), ado.floats(), adq.floats(), adk.floats(),
                 adv.floats(), scratch.floats(), stream, error);
      });
      if (ok)
        rows.push_back({"attention", "unfused fwd+bwd " + dims, s,
                        flops / s / 1e12, "TFLOP/s", 0});
      else
        std::fprintf(stderr, "bench-cuda: unfused attention: %s\n",
                     error.c_str());
      struct Variant {
        cuda::ElementType type;
        const char *name;
      };
      for (auto [type, name] :
           {Variant{cuda::ElementType::F32, "fused f32"},
            Variant{cuda::ElementType::F16, "fused f16 (tensor cores)"},
            Variant{cuda::ElementType::BF16, "fused bf16 (tensor cores)"}}) {
        s = timeIt(stream, reps, [&] {
          cuda::fusedCausalAttention(shape, type, aq.floats(), ak.floats(),
                                     av.floats(), aout.floats(), stream);
          cuda::fusedCausalAttentionBackward(
              shape, type, aq.floats(), ak.floats(), av.floats(), ado.floats(),
              adq.floats(), adk.floats(), adv.floats(), scratch.floats(),
              stream);
        });
        cudaError_t status = cudaGetLastError();
        if (status != cudaSuccess) {
          std::fprintf(stderr, "bench-cuda: %s attention: %s\n", name,
                       cudaGetErrorString(status));
          continue;
        }
        rows.push_back({"attention", std::string(name) + " fwd+bwd " + dims,
                        s, flops / s / 1e12, "TFLOP/s", 0});
      }
    }
  }

  if (json) {
    for (const Row &r : rows)
      std::printf("{\"bench\":\"%s\",\"what\":\"%s\",\"device\":\"%s\","
                  "\"seconds\":%.6g,\"rate\":%.6g,\"unit\":\"%s\","
                  "\"of_peak\":%.4g}\n",
                  r.bench.c_str(), r.what.c_str(), prop.name, r.seconds, r.rate,
                  r.unit, r.ofPeak);
  } else {
    std::printf("device: %s, peak memory bandwidth %.0f GB/s\n", prop.name,
                peakBandwidth / 1e9);
    std::printf("%-12s %-36s %12s %14s %9s\n", "bench", "what", "ms", "rate",
                "of peak");
    for (const Row &r : rows) {
      char peak[16] = "-";
      if (r.ofPeak > 0)
        std::snprintf(peak, sizeof peak, "%.0f%%", r.ofPeak * 100);
      std::printf("%-12s %-36s %12.3f %9.1f %-7s %6s\n", r.bench.c_str(),
                  r.what.c_str(), r.seconds * 1e3, r.rate, r.unit, peak);
    }
  }
  cudaStreamDestroy(stream);
  return 0;
}
