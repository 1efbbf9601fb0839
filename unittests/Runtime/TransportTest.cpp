//===- TransportTest.cpp - Gloo transport and link shaping ----------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// Two or three ranks in one process (threads), over loopback, with a fresh
// file-store directory each.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Runtime/Transport.h"

#include <gtest/gtest.h>

#include <atomic>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <numeric>
#include <thread>
#include <unistd.h>

using namespace dtfm::runtime;
using Clock = std::chrono::steady_clock;

namespace {

std::string freshStore() {
  char pattern[] = "/tmp/dtfm-transport-test-XXXXXX";
  const char *dir = ::mkdtemp(pattern);
  EXPECT_NE(dir, nullptr);
  return dir ? dir : "/tmp";
}

TransportOptions optionsFor(int rank, const std::string &store, int size = 2) {
  TransportOptions o;
  o.rank = rank;
  for (int r = 0; r < size; ++r)
    o.names.push_back("dev" + std::to_string(r));
  o.storeDir = store;
  o.timeout = std::chrono::milliseconds(5000);
  return o;
}

/// Runs `body(rank, transport)` on `size` connected ranks.
void withRanks(int size, const std::function<void(TransportOptions &)> &tweak,
               const std::function<void(int, Transport &)> &body,
               bool finalBarrier = true) {
  std::string store = freshStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      TransportOptions o = optionsFor(r, store, size);
      tweak(o);
      std::string error;
      std::unique_ptr<Transport> t = Transport::connect(o, error);
      ASSERT_TRUE(t) << error;
      body(r, *t);
      if (finalBarrier) {
        EXPECT_TRUE(t->barrier(error)) << error;
      }
    });
  for (std::thread &t : threads)
    t.join();
  std::filesystem::remove_all(store);
}

TEST(TransportTest, SendRecvAndAllreduce) {
  withRanks(
      3, [](TransportOptions &o) { o.groups = {{0, 1, 2}}; },
      [](int rank, Transport &t) {
        std::string error;
        if (rank == 0) {
          std::vector<float> v = {1, 2, 3};
          const char *raw = reinterpret_cast<const char *>(v.data());
          ASSERT_TRUE(t.send(2, 42, std::vector<char>(raw, raw + 12), error))
              << error;
          ASSERT_TRUE(t.flush(error)) << error;
        }
        if (rank == 2) {
          std::vector<float> v(3);
          ASSERT_TRUE(t.recv(0, 42, v.data(), 12, error)) << error;
          EXPECT_EQ(v, (std::vector<float>{1, 2, 3}));
        }
        std::vector<float> x = {float(rank), 1};
        ASSERT_TRUE(t.allreduceSum(0, x.data(), 2, error)) << error;
        EXPECT_EQ(x, (std::vector<float>{3, 3}));
        int64_t low = 10 - rank;
        ASSERT_TRUE(t.allreduceMin(low, error)) << error;
        EXPECT_EQ(low, 8);
      });
}

/// With shaped links the allreduce is a ring over the shaped links: same
/// sums, on every member, for sizes that do not divide evenly.
TEST(TransportTest, ShapedRingAllreduce) {
  withRanks(
      3,
      [](TransportOptions &o) {
        o.groups = {{0, 1, 2}};
        o.links.assign(9, LinkShape{1e-4, 1e9});
      },
      [](int rank, Transport &t) {
        std::string error;
        for (size_t count : {size_t(1), size_t(10), size_t(1000)}) {
          std::vector<float> x(count);
          for (size_t i = 0; i < count; ++i)
            x[i] = static_cast<float>(rank * 1000 + i);
          ASSERT_TRUE(t.allreduceSum(0, x.data(), count, error)) << error;
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(x[i], static_cast<float>(3000 + 3 * i)) << i;
        }
      });
}

/// Three ranks in one collective group, over links shaped or not (the
/// ring collectives run over the point-to-point links either way).
std::function<void(TransportOptions &)> oneGroupOfThree(bool shaped) {
  return [shaped](TransportOptions &o) {
    o.groups = {{0, 1, 2}};
    if (shaped)
      o.links.assign(9, LinkShape{1e-4, 1e9});
  };
}

/// The int8 ring: a quarter of the bytes; every member ends with the same
/// values, within the roundings of the hops of the true sum.
TEST(TransportTest, Int8RingAllreduce) {
  for (bool shaped : {false, true})
    withRanks(
        3, oneGroupOfThree(shaped),
        [](int rank, Transport &t) {
          std::string error;
          for (size_t count : {size_t(1), size_t(10), size_t(1000)}) {
            std::vector<float> x(count);
            for (size_t i = 0; i < count; ++i)
              x[i] = static_cast<float>((rank + 1) * (i % 7)) - 3.0f;
            ASSERT_TRUE(t.allreduceSum(0, dtfm::format::WireCodec::Int8,
                                       x.data(), count, count, error))
                << error;
            // The true sum: 6 (i % 7) - 9, at most 27 in magnitude; a hop
            // rounds by at most half a scale of <= 27 / 127.
            for (size_t i = 0; i < count; ++i)
              ASSERT_NEAR(x[i], 6.0f * (i % 7) - 9.0f, 3 * 27.0 / 127)
                  << i;
            // Every member holds the same values: their sum is 3x one's.
            std::vector<float> copy = x;
            ASSERT_TRUE(t.allreduceSum(0, copy.data(), count, error))
                << error;
            for (size_t i = 0; i < count; ++i)
              ASSERT_EQ(copy[i], 3 * x[i]) << i;
          }
        });
}

/// Sharded state's collectives, with uneven chunks (one empty): after the
/// reduce-scatter each member's own chunk is the exact sum; the all-gather
/// gives every member each member's chunk; a gather while a reduce-scatter
/// of the same group runs on another thread (the sync thread) does not mix
/// them up.
TEST(TransportTest, ReduceScatterAndAllGatherOfUnevenChunks) {
  for (bool shaped : {false, true})
    withRanks(
        3, oneGroupOfThree(shaped),
        [](int rank, Transport &t) {
          std::string error;
          const std::vector<size_t> bounds = {0, 5, 5, 12};
          std::vector<float> x(12);
          for (size_t i = 0; i < x.size(); ++i)
            x[i] = static_cast<float>((rank + 1) * 100 + i);
          ASSERT_TRUE(t.reduceScatterSum(0, x.data(), bounds, error)) << error;
          for (size_t i = bounds[rank]; i < bounds[rank + 1]; ++i)
            ASSERT_EQ(x[i], static_cast<float>(600 + 3 * i)) << i;
          std::vector<float> mine(12, -1.0f);
          for (size_t i = bounds[rank]; i < bounds[rank + 1]; ++i)
            mine[i] = static_cast<float>(rank * 1000 + i);
          std::vector<float> again = x;
          std::string syncError;
          std::thread sync([&] {
            EXPECT_TRUE(t.reduceScatterSum(0, again.data(), bounds, syncError))
                << syncError;
          });
          ASSERT_TRUE(t.allGather(0, mine.data(), bounds, error)) << error;
          sync.join();
          for (int member = 0; member < 3; ++member)
            for (size_t i = bounds[member]; i < bounds[member + 1]; ++i)
              ASSERT_EQ(mine[i], static_cast<float>(member * 1000 + i)) << i;
          std::vector<size_t> wrong = {0, 12};
          EXPECT_FALSE(t.reduceScatterSum(0, x.data(), wrong, error));
          EXPECT_NE(error.find("2 chunk bounds for a group of 3"),
                    std::string::npos)
              << error;
        });
}

// Top-k exchanges: every member's sparse vector gathered around the ring
// and summed in member order -- the exact sum, the same on every member.
TEST(TransportTest, SparseAllgatherSum) {
  for (bool shaped : {false, true})
    withRanks(
        3, oneGroupOfThree(shaped),
        [](int rank, Transport &t) {
          std::string error;
          const size_t count = 100;
          for (int round = 0; round < 3; ++round) {
            // Rank r holds r + 1 at i = 10 r + round and -1 at i = 99.
            std::vector<float> x(count, 0.0f);
            x[10 * rank + round] = static_cast<float>(rank + 1);
            x[99] = -1;
            ASSERT_TRUE(t.allreduceSum(0, dtfm::format::WireCodec::TopK,
                                       x.data(), count, 2, error))
                << error;
            for (size_t i = 0; i < count; ++i) {
              float expected = 0;
              for (int r = 0; r < 3; ++r)
                if (i == size_t(10 * r + round))
                  expected += static_cast<float>(r + 1);
              if (i == 99)
                expected = -3;
              ASSERT_EQ(x[i], expected) << round << " " << i;
            }
          }
          // More nonzeros than the capacity: refused before sending (every
          // rank alike, so none waits).
          std::vector<float> full(count, 1.0f);
          EXPECT_FALSE(t.allreduceSum(0, dtfm::format::WireCodec::TopK,
                                      full.data(), count, 2, error));
          EXPECT_EQ(error, "gradient allreduce: a top-k exchange with more "
                           "than its 2 entries");
        });
}

TEST(TransportTest, PostedReceivesTakeMessagesInAnyOrder) {
  withRanks(
      2, [](TransportOptions &) {},
      [](int rank, Transport &t) {
        std::string error;
        if (rank == 0) {
          for (uint64_t slot : {7, 5}) {
            std::vector<char> m(4, static_cast<char>(slot));
            ASSERT_TRUE(t.send(1, slot, m, error)) << error;
          }
          ASSERT_TRUE(t.flush(error)) << error;
          return;
        }
        std::vector<char> a(4), b(4);
        int first = t.postRecv(0, 5, a.data(), 4);
        int second = t.postRecv(0, 7, b.data(), 4);
        ASSERT_TRUE(t.waitPosted(first, error)) << error;
        ASSERT_TRUE(t.waitPosted(second, error)) << error;
        EXPECT_EQ(a[0], 5);
        EXPECT_EQ(b[0], 7);
      });
}

/// Shaped links: 1 MB and 4 MB messages stream at the link's bandwidth
/// (within 10%), and a message arrives no sooner than the latency. The
/// receiver posts its receives first, as the workers' receive slot does, so
/// that what is measured is the link model rather than this machine's
/// thread wake-ups (arrivals are scheduled, so a late wake-up delays one
/// message, not the ones after it).
TEST(TransportTest, ShapedLinkKeepsBandwidthAndLatency) {
  const double bytesPerSecond = 400e6 / 8; // 400 Mbit/s
  const double latency = 0.02;             // 20 ms
  for (size_t size : {size_t(1) << 20, size_t(4) << 20}) {
    int count = size == (size_t(1) << 20) ? 16 : 5;
    double throughput = 0, firstArrival = 0;
    Clock::time_point start;
    withRanks(
        2,
        [&](TransportOptions &o) {
          o.links.assign(4, LinkShape{});
          o.links[1] = {latency, bytesPerSecond}; // 0 -> 1
          o.links[2] = {latency, bytesPerSecond}; // 1 -> 0
        },
        [&](int rank, Transport &t) {
          std::string error;
          std::vector<std::vector<char>> buffers(count,
                                                 std::vector<char>(size));
          std::vector<int> handles;
          if (rank == 1)
            for (int i = 0; i < count; ++i)
              handles.push_back(t.postRecv(0, i, buffers[i].data(), size));
          ASSERT_TRUE(t.barrier(error)) << error;
          if (rank == 0) {
            start = Clock::now();
            for (int i = 0; i < count; ++i)
              ASSERT_TRUE(t.send(1, i, std::vector<char>(size, 'x'), error))
                  << error;
            ASSERT_TRUE(t.flush(error)) << error;
            return;
          }
          Clock::time_point first;
          for (int i = 0; i < count; ++i) {
            ASSERT_TRUE(t.waitPosted(handles[i], error)) << error;
            if (i == 0)
              first = Clock::now();
          }
          Clock::time_point last = Clock::now();
          // All arrive one latency and count serialisations after the
          // sender started (timed from the sender's start, not from this
          // thread's first wake-up, which a busy machine can delay and so
          // shorten the interval: measured 1.25x under a parallel ASan run).
          throughput =
              static_cast<double>(size) * count /
              (std::chrono::duration<double>(last - start).count() - latency);
          firstArrival = std::chrono::duration<double>(first - start).count();
        });
    // Never faster than the shape; slower only by what a busy machine
    // takes from the threads (0.90 measured beside two busy loops).
    EXPECT_LE(throughput / bytesPerSecond, 1.10)
        << size << "-byte messages: " << throughput * 8 / 1e6 << " Mbit/s";
    EXPECT_GE(throughput / bytesPerSecond, 0.75)
        << size << "-byte messages: " << throughput * 8 / 1e6 << " Mbit/s";
    std::printf("%zu-byte messages: %.3f of the shaped bandwidth\n", size,
                throughput / bytesPerSecond);
    EXPECT_GE(firstArrival, latency + size / bytesPerSecond - 1e-3);
  }
}

TEST(TransportTest, PublishedValuesReachEveryRank) {
  withRanks(
      3, [](TransportOptions &) {},
      [](int rank, Transport &t) {
        std::string error, value;
        // Binary values (an NCCL unique id is 128 arbitrary bytes).
        std::string id("\0\x01\xff id", 6);
        if (rank == 1) {
          ASSERT_TRUE(t.publish("group.0.1.2/nccl-id", id, error)) << error;
        }
        ASSERT_TRUE(t.lookup("group.0.1.2/nccl-id", value, error)) << error;
        EXPECT_EQ(value, id);
      });
}

TEST(TransportTest, LookupOfAnAbsentKeyTimesOut) {
  withRanks(
      2, [](TransportOptions &o) { o.timeout = std::chrono::milliseconds(200); },
      [](int rank, Transport &t) {
        std::string error, value;
        EXPECT_FALSE(t.lookup("never", value, error));
        EXPECT_NE(error.find("'never' did not appear in the rendezvous store "
                             "within 200 ms"),
                  std::string::npos)
            << error;
      },
      /*finalBarrier=*/false);
}

TEST(TransportTest, TimeoutNamesThePeer) {
  std::atomic<bool> timedOut{false};
  withRanks(
      2,
      // Long enough for the rendezvous on a loaded machine; the receive
      // below then waits it out.
      [](TransportOptions &o) { o.timeout = std::chrono::milliseconds(2000); },
      [&](int rank, Transport &t) {
        if (rank != 1) {
          // Stay connected until rank 1 has timed out: closing at once
          // could cut rank 1's rendezvous short.
          for (int i = 0; i < 1000 && !timedOut; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return;
        }
        std::string error;
        char byte;
        EXPECT_FALSE(t.recv(0, 9, &byte, 1, error));
        EXPECT_NE(error.find("dev0 (rank 0)"), std::string::npos) << error;
        timedOut = true;
      },
      /*finalBarrier=*/false); // a timed-out pair is closed for good
}

TEST(TransportTest, MissingPeerIsNamed) {
  // A rank other than 0 knows only that rank 0 never answered; rank 0
  // names every rank that never came.
  for (int rank : {1, 0}) {
    std::string store = freshStore();
    TransportOptions o = optionsFor(rank, store, 3);
    o.timeout = std::chrono::milliseconds(300);
    std::string error;
    Clock::time_point start = Clock::now();
    EXPECT_FALSE(Transport::connect(o, error));
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(),
              5.0);
    EXPECT_NE(error.find(rank == 1 ? "no sign of dev0 (rank 0) within 300 ms"
                                   : "no sign of dev1 (rank 1), dev2 (rank 2) "
                                     "within 300 ms"),
              std::string::npos)
        << error;
    std::filesystem::remove_all(store);
  }
}

/// Connects `options.size()` ranks concurrently, each with its options;
/// their errors ("" for a rank that connected).
std::vector<std::string>
connectAll(const std::vector<TransportOptions> &options) {
  std::vector<std::string> errors(options.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < options.size(); ++i)
    threads.emplace_back([&, i] {
      std::string error;
      std::unique_ptr<Transport> t = Transport::connect(options[i], error);
      if (t) {
        // Stay until everyone has joined: a rank leaving early would cut
        // the others' mesh short.
        EXPECT_TRUE(t->barrier(error)) << error;
      }
      errors[i] = t ? "" : error;
    });
  for (std::thread &t : threads)
    t.join();
  return errors;
}

TEST(TransportTest, KeysOfADeadRunAreNeverRead) {
  // A run that died on a store leaves its keys; the next run with the same
  // store and run id meets only its own ranks.
  std::string store = freshStore();
  std::vector<TransportOptions> ranks = {optionsFor(0, store, 3),
                                         optionsFor(1, store, 3),
                                         optionsFor(2, store, 3)};
  for (TransportOptions &o : ranks)
    o.runId = "job7";
  for (const std::string &e : connectAll(ranks))
    EXPECT_EQ(e, "");
  for (int attempt = 0; attempt < 2; ++attempt)
    for (const std::string &e : connectAll(ranks))
      EXPECT_EQ(e, "");
  std::filesystem::remove_all(store);
}

TEST(TransportTest, RunIdsSeparateJobsOnOneStore) {
  // Two jobs of two ranks each on one store directory at once.
  std::string store = freshStore();
  std::vector<TransportOptions> ranks;
  for (const char *job : {"a", "b"})
    for (int r = 0; r < 2; ++r) {
      ranks.push_back(optionsFor(r, store, 2));
      ranks.back().runId = job;
    }
  for (const std::string &e : connectAll(ranks))
    EXPECT_EQ(e, "");
  std::filesystem::remove_all(store);
}

TEST(TransportTest, TwoProcessesClaimingOneRankFailEveryRank) {
  for (int claimed : {1, 0}) {
    std::string store = freshStore();
    std::vector<TransportOptions> ranks = {optionsFor(0, store, 3),
                                           optionsFor(1, store, 3),
                                           optionsFor(2, store, 3),
                                           optionsFor(claimed, store, 3)};
    for (TransportOptions &o : ranks)
      o.timeout = std::chrono::milliseconds(3000);
    Clock::time_point start = Clock::now();
    std::vector<std::string> errors = connectAll(ranks);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(),
              10.0);
    std::string expected =
        "two processes claim dev" + std::to_string(claimed) + " (rank " +
        std::to_string(claimed) + ")";
    int told = 0;
    for (const std::string &e : errors)
      told += e.find(expected) != std::string::npos;
    // Every rank is told, but for a second claimant that arrives after
    // rank 0 has started the run: it times out alone.
    EXPECT_GE(told, 3) << errors[0] << " | " << errors[1] << " | "
                       << errors[2] << " | " << errors[3];
    for (const std::string &e : errors)
      EXPECT_NE(e, "");
    std::filesystem::remove_all(store);
  }
}

TEST(TransportTest, HostPortParsing) {
  std::string host, error;
  int port = 0;
  EXPECT_TRUE(parseHostPort("10.0.0.1:2900", host, port, error));
  EXPECT_EQ(host, "10.0.0.1");
  EXPECT_EQ(port, 2900);
  EXPECT_FALSE(parseHostPort("nohost", host, port, error));
  EXPECT_FALSE(parseHostPort("h:70000", host, port, error));
  EXPECT_FALSE(parseHostPort(":80", host, port, error));
}

} // namespace
