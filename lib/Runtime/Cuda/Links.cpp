//===- Links.cpp - NCCL for the CUDA executor's gradients and links -------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The data-parallel and tensor-parallel groups' NCCL communicators
// (connectGroup, connectTensorParallelGroup) and the pipeline links between
// distinct GPUs (connectPeers: one two-rank communicator per direction),
// negotiated through the rendezvous store; members or peers sharing a GPU
// keep the worker's transport.
//
//===----------------------------------------------------------------------===//

#include "ExecutorImpl.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <tuple>

using namespace dtfm;
using namespace dtfm::runtime;
using namespace dtfm::runtime::cuda::impl;

bool CudaExecutor::connectGroup(const std::vector<int> &members, int position,
                                const ShareFn &share, std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  // Compressed exchanges (dtfm.compression) go through the transport, which
  // encodes them on the wire; NCCL would send them dense.
  for (const ProgramOp &op : program.ops)
    if (op.kind == OpKind::GradSync &&
        op.attrs.compression != format::WireCodec::Dense)
      return true;
  if (!openCommunicator(members, position, share, "the data-parallel group",
                        comm, error))
    return false;
  if (comm) {
    groupSize = static_cast<int>(members.size());
    groupPosition = position;
  }
  return true;
}

bool CudaExecutor::connectTensorParallelGroup(const std::vector<int> &members,
                                              int position,
                                              const ShareFn &share,
                                              std::string &error) {
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  return openCommunicator(members, position, share, "the tensor-parallel group",
                          tensorParallelComm, error);
}

bool CudaExecutor::openCommunicator(const std::vector<int> &members,
                                    int position, const ShareFn &share,
                                    const std::string &what, ncclComm_t &out,
                                    std::string &error) {
  out = nullptr;
  // NCCL takes one rank per GPU: where members share a GPU (several workers
  // on one device), every member sees it and all keep the transport.
  std::string mine;
  if (!gpuIdentity(mine, error))
    return false;
  if (!share("gpu." + std::to_string(position), mine, true, error))
    return false;
  std::set<std::string> gpus;
  for (size_t i = 0; i < members.size(); ++i) {
    std::string theirs;
    if (!share("gpu." + std::to_string(i), theirs, false, error))
      return false;
    gpus.insert(theirs);
  }
  if (gpus.size() != members.size())
    return true;
  ncclUniqueId id;
  std::string bytes;
  if (position == 0) {
    ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) {
      error = std::string("NCCL unique id: ") + ncclGetErrorString(status);
      return false;
    }
    bytes.assign(reinterpret_cast<const char *>(&id), sizeof id);
    if (!share("nccl-id", bytes, true, error))
      return false;
  } else {
    if (!share("nccl-id", bytes, false, error))
      return false;
    if (bytes.size() != sizeof id) {
      error = "malformed NCCL unique id in the rendezvous store";
      return false;
    }
    std::memcpy(&id, bytes.data(), sizeof id);
  }
  ncclResult_t status =
      ncclCommInitRank(&out, static_cast<int>(members.size()), id, position);
  if (status != ncclSuccess) {
    out = nullptr;
    error = "NCCL communicator of " + what + ": " + ncclGetErrorString(status);
    return false;
  }
  return true;
}

bool CudaExecutor::sumOverTensorParallelGroup(const float *in, float *out,
                                              int64_t count,
                                              std::string &error) {
  size_t n = static_cast<size_t>(count);
  if (tensorParallelComm) {
    ncclResult_t status = ncclAllReduce(in, out, n, ncclFloat, ncclSum,
                                        tensorParallelComm, computeStream());
    if (status != ncclSuccess) {
      error = std::string("tensor-parallel sum (NCCL): ") +
              ncclGetErrorString(status);
      return false;
    }
    return true;
  }
  if (!tensorParallelSum) {
    error = "no tensor-parallel group to sum over";
    return false;
  }
  // Through the host: the worker's transport sums over the group.
  std::vector<float> host(n);
  if (cudaFailed(cudaMemcpyAsync(host.data(), in, n * sizeof(float),
                                 cudaMemcpyDeviceToHost, computeStream()),
                 "copying from the GPU", error) ||
      cudaFailed(cudaStreamSynchronize(computeStream()), "waiting for the GPU",
                 error) ||
      !tensorParallelSum(host.data(), n, error))
    return false;
  return !cudaFailed(cudaMemcpyAsync(out, host.data(), n * sizeof(float),
                                     cudaMemcpyHostToDevice, computeStream()),
                     "copying to the GPU", error) &&
         !cudaFailed(cudaStreamSynchronize(computeStream()),
                     "waiting for the GPU", error);
}

bool CudaExecutor::gpuIdentity(std::string &identity,
                               std::string &error) const {
  char bus[32] = {0}, host[256] = {0};
  if (cudaFailed(cudaDeviceGetPCIBusId(bus, sizeof bus, device),
                 "reading the GPU's PCI bus id", error))
    return false;
  ::gethostname(host, sizeof host - 1);
  identity = std::string(host) + "/" + bus;
  return true;
}

bool CudaExecutor::connectPeers(int rank, const std::map<int, int> &linkOps,
                                const ShareFn &share, std::set<int> &taken,
                                std::string &error) {
  if (linkOps.empty())
    return true;
  if (cudaFailed(cudaSetDevice(device), "selecting the CUDA device", error))
    return false;
  std::string mine;
  if (!gpuIdentity(mine, error) ||
      !share("gpu." + std::to_string(rank), mine, true, error))
    return false;
  // Both ends see both identities, so they agree on which links take NCCL:
  // those between distinct GPUs.
  std::set<int> peers;
  for (const auto &[op, peer] : linkOps)
    peers.insert(peer);
  std::vector<int> linked;
  for (int peer : peers) {
    std::string theirs;
    if (!share("gpu." + std::to_string(peer), theirs, false, error))
      return false;
    if (theirs != mine)
      linked.push_back(peer);
  }
  if (linked.empty())
    return true;
  // The sender of each direction makes its unique id; every worker
  // publishes its own before looking up its peers'.
  auto key = [](int from, int to) {
    return "nccl." + std::to_string(from) + "-" + std::to_string(to);
  };
  std::map<int, ncclUniqueId> outgoing, incoming;
  for (int peer : linked) {
    ncclUniqueId id;
    ncclResult_t status = ncclGetUniqueId(&id);
    if (status != ncclSuccess) {
      error = std::string("NCCL unique id: ") + ncclGetErrorString(status);
      return false;
    }
    std::string bytes(reinterpret_cast<const char *>(&id), sizeof id);
    if (!share(key(rank, peer), bytes, true, error))
      return false;
    outgoing[peer] = id;
  }
  for (int peer : linked) {
    std::string bytes;
    if (!share(key(peer, rank), bytes, false, error))
      return false;
    if (bytes.size() != sizeof(ncclUniqueId)) {
      error = "malformed NCCL unique id in the rendezvous store";
      return false;
    }
    std::memcpy(&incoming[peer], bytes.data(), sizeof(ncclUniqueId));
  }
  // All communicators at once: each initialisation waits for its peer, and
  // grouped they cannot wait for one another in a cycle.
  ncclGroupStart();
  for (int peer : linked) {
    ncclCommInitRank(&sendComms[peer], 2, outgoing[peer], 0);
    ncclCommInitRank(&recvComms[peer], 2, incoming[peer], 1);
  }
  ncclResult_t status = ncclGroupEnd();
  if (status != ncclSuccess) {
    error = std::string("NCCL communicators of the pipeline links: ") +
            ncclGetErrorString(status);
    return false;
  }
  for (const auto &[op, peer] : linkOps)
    if (sendComms.count(peer))
      peerOfOp[op] = peer;
  taken.insert(linked.begin(), linked.end());
  return true;
}

std::vector<std::pair<int, const ProgramOp *>>
CudaExecutor::linkedOps(OpKind kind, OpPhase phase) const {
  std::vector<std::tuple<int, int64_t, const ProgramOp *>> found;
  for (int index : program.opsOf(phase)) {
    const ProgramOp &op = program.ops[index];
    auto peer = peerOfOp.find(op.index);
    if (op.kind == kind && peer != peerOfOp.end())
      found.emplace_back(peer->second, op.attrs.tag, &op);
  }
  std::sort(found.begin(), found.end(), [](const auto &a, const auto &b) {
    return std::make_pair(std::get<0>(a), std::get<1>(a)) <
           std::make_pair(std::get<0>(b), std::get<1>(b));
  });
  std::vector<std::pair<int, const ProgramOp *>> ordered;
  for (const auto &[peer, tag, op] : found)
    ordered.emplace_back(peer, op);
  return ordered;
}
