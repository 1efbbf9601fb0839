//===- ClusterFileTest.cpp - Cluster files and presets --------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//

#include "PlannerTestUtils.h"
#include "dtfm/Planner/Cluster.h"

#include <gtest/gtest.h>

#include <fstream>

using namespace dtfm::planner;

namespace {

std::string presetPath(const std::string &name) {
  return testutil::sourceDir() + "/examples/clusters/" + name + ".textproto";
}

size_t indexOf(const Cluster &c, const std::string &name) {
  for (size_t i = 0; i < c.size(); ++i)
    if (c.devices[i].name == name)
      return i;
  ADD_FAILURE() << "no device " << name;
  return 0;
}

TEST(ClusterFile, PresetsLoad) {
  struct Expect {
    const char *name;
    size_t devices;
  } presets[] = {{"dc-ondemand", 64}, {"dc-spot", 48},     {"multi-dc", 64},
                 {"geo-regional", 64}, {"geo-worldwide", 64}, {"local-8", 8}};
  for (const Expect &e : presets) {
    Cluster c;
    std::string error;
    ASSERT_TRUE(loadClusterFile(presetPath(e.name), c, error)) << error;
    EXPECT_EQ(c.size(), e.devices) << e.name;
    EXPECT_EQ(c.name, e.name);
  }
}

TEST(ClusterFile, WorldwideLinksFollowTableTwo) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadClusterFile(presetPath("geo-worldwide"), c, error)) << error;
  size_t seoul = indexOf(c, "seoul-gpu3"), ireland = indexOf(c, "ireland-gpu0");
  EXPECT_EQ(c.delayMs(seoul, ireland), 228);
  EXPECT_EQ(c.bandwidthGbps(ireland, seoul), 0.335);
  size_t seoul2 = indexOf(c, "seoul-gpu5");
  EXPECT_EQ(c.delayMs(seoul, seoul2), 5);
  EXPECT_EQ(c.bandwidthGbps(seoul, seoul2), 2);
  EXPECT_EQ(c.devices[seoul].peakFlops, 125e12);
}

std::string parseError(const std::string &text) {
  Cluster c;
  std::string error;
  EXPECT_FALSE(parseClusterText(text, "c.textproto", c, error)) << text;
  return error;
}

TEST(ClusterFile, ErrorsNameTheFileAndWhatIsWrong) {
  EXPECT_EQ(parseError("devices { name: \"a\" \n count: x }"),
            "c.textproto:2:9: Expected integer, got: x");
  EXPECT_EQ(parseError("name: \"empty\""), "c.textproto: no devices");
  EXPECT_EQ(parseError("devices { name: \"a\" region: \"r\" count: 2 }"),
            "c.textproto: region 'r' has several devices but no intra_region "
            "link is given");
  EXPECT_EQ(parseError("devices { name: \"a\" region: \"x\" }\n"
                       "devices { name: \"b\" region: \"y\" }"),
            "c.textproto: no link between regions 'x' and 'y' (add "
            "region_links or inter_region_default)");
  EXPECT_EQ(parseError("devices { name: \"a\" region: \"x\" }\n"
                       "devices { name: \"b\" region: \"y\" }\n"
                       "region_links { a: \"x\" b: \"y\" bandwidth_gbps: 0 }"),
            "c.textproto: link x <-> y: expected delay_ms >= 0 and "
            "bandwidth_gbps > 0, got 0 ms and 0 Gbps");
  EXPECT_EQ(parseError("devices { name: \"a\" }\ndevices { name: \"a\" }"),
            "c.textproto: duplicate device name 'a'");
  EXPECT_EQ(parseError("devices { name: \"../../pwned\" }"),
            "c.textproto: device '../../pwned': the name is not letters, "
            "digits, '_', '-' and '.' (at most 128, not starting with '.'): "
            "device names become file names");
  EXPECT_EQ(parseError("devices { name: \"" + std::string(128, 'g') +
                       "\" count: 2 }"),
            "c.textproto: device '" + std::string(128, 'g') +
                "0': the name is not letters, digits, '_', '-' and '.' (at "
                "most 128, not starting with '.'): device names become file "
                "names");
  EXPECT_EQ(parseError("devices { name: \"a\" efficiency: 2 }"),
            "c.textproto: device a: expected peak_flops >= 0, 0 < efficiency "
            "<= 1, memory_bytes >= 0 and memory_bytes_per_second >= 0");
  EXPECT_EQ(parseError("devices { name: \"a\" memory_bytes_per_second: 0 }"),
            "c.textproto: device a: memory_bytes_per_second must be positive "
            "and finite");
  EXPECT_EQ(parseError("devices { name: \"a\" memory_bytes_per_second: -1 }"),
            "c.textproto: device a: memory_bytes_per_second must be positive "
            "and finite");
  EXPECT_EQ(parseError("devices { name: \"a\" memory_bytes_per_second: inf }"),
            "c.textproto: device a: memory_bytes_per_second must be positive "
            "and finite");
}

TEST(ClusterFile, DeviceMatricesAreReadRelativeToTheFileAndSymmetrised) {
  std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/d.csv") << "0,10\n20,0\n";
  std::ofstream(dir + "/b.csv") << "0,1\n3,0\n";
  std::ofstream(dir + "/bad.csv") << "0,1,2\n1,0,2\n2,2,0\n";
  std::string devices = "devices { name: \"g\" count: 2 }\n";
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseClusterText(devices + "delay_matrix_csv: \"d.csv\"\n"
                                         "bandwidth_matrix_csv: \"b.csv\"",
                               dir + "/c.textproto", c, error))
      << error;
  EXPECT_EQ(c.delayMs(0, 1), 15);
  EXPECT_EQ(c.bandwidthGbps(1, 0), 2);
  EXPECT_FALSE(parseClusterText(devices + "delay_matrix_csv: \"bad.csv\"\n"
                                          "bandwidth_matrix_csv: \"b.csv\"",
                                dir + "/c.textproto", c, error));
  EXPECT_NE(error.find("matrices are 3x3 and 2x2, but the cluster has 2 "
                       "devices"),
            std::string::npos)
      << error;
  EXPECT_FALSE(parseClusterText(devices + "delay_matrix_csv: \"d.csv\"",
                                dir + "/c.textproto", c, error));
  EXPECT_NE(error.find("give both"), std::string::npos) << error;
}

} // namespace

namespace {

TEST(ClusterFile, HostileSizesAndSilentDefaultsAreRefused) {
  // Explicit zeros are errors, not the defaults of an unset field.
  EXPECT_EQ(parseError("devices { name: \"a\" count: 0 }"),
            "c.textproto: device a: count must be at least 1");
  EXPECT_EQ(parseError("devices { name: \"a\" efficiency: 0 }"),
            "c.textproto: device a: efficiency must be in (0, 1], got 0");
  // A billion devices is refused before any is built.
  EXPECT_EQ(parseError("devices { name: \"a\" count: 1000000000 }"),
            "c.textproto: more than 4096 devices (device a adds 1000000000)");
  EXPECT_EQ(parseError("devices { name: \"a\" count: 4000 }\n"
                       "devices { name: \"b\" count: 97 }"),
            "c.textproto: more than 4096 devices (device b adds 97)");
  // A region link naming a region no device is in (a typo) is an error,
  // not a silent fall-back to inter_region_default.
  EXPECT_EQ(parseError("devices { name: \"a\" region: \"x\" }\n"
                       "devices { name: \"b\" region: \"y\" }\n"
                       "region_links { a: \"x\" b: \"yy\" delay_ms: 1 "
                       "bandwidth_gbps: 1 }\n"
                       "inter_region_default { delay_ms: 1 bandwidth_gbps: "
                       "1 }"),
            "c.textproto: link x <-> yy: no device is in region 'yy'");
}

TEST(ClusterFile, MatrixEntriesAreCheckedBeforeAveraging) {
  std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/ok.csv") << "0,1\n1,0\n";
  // -1 and 0 would hide behind their mirrors once averaged.
  std::ofstream(dir + "/negative.csv") << "0,-1\n3,0\n";
  std::ofstream(dir + "/zero.csv") << "0,0\n2,0\n";
  std::ofstream(dir + "/trailing.csv") << "0,1,\n1,0,\n";
  std::string devices = "devices { name: \"g\" count: 2 }\n";
  auto load = [&](const std::string &delay, const std::string &bandwidth) {
    Cluster c;
    std::string error;
    EXPECT_FALSE(parseClusterText(devices + "delay_matrix_csv: \"" + delay +
                                      "\"\nbandwidth_matrix_csv: \"" +
                                      bandwidth + "\"",
                                  dir + "/c.textproto", c, error));
    return error;
  };
  EXPECT_EQ(load("negative.csv", "ok.csv"),
            dir + "/c.textproto: link g0 <-> g1: delay must be finite and >= "
                  "0, got -1.000000 ms");
  EXPECT_EQ(load("ok.csv", "zero.csv"),
            dir + "/c.textproto: link g0 <-> g1: bandwidth must be finite and "
                  "> 0, got 0.000000 Gbps");
  EXPECT_EQ(load("trailing.csv", "ok.csv"),
            dir + "/trailing.csv:1: a trailing comma (an empty last column)");
}

} // namespace

namespace {
Cluster parsed(const std::string &text) {
  Cluster cluster;
  std::string error;
  EXPECT_TRUE(parseClusterText(text, "c.textproto", cluster, error)) << error;
  return cluster;
}
} // namespace

TEST(ClusterFile, NodesAreNamedOrInferredFromFastLinks) {
  // Named: every device of an entry in its node; an unnamed device is a
  // node of its own.
  Cluster named =
      parsed("devices { name: \"a\" region: \"r\" count: 2 node: \"vm0\" }\n"
             "devices { name: \"b\" region: \"r\" }\n"
             "intra_region { delay_ms: 0.1 bandwidth_gbps: 400 }");
  EXPECT_EQ(named.devices[0].node, "vm0");
  EXPECT_EQ(named.devices[1].node, "vm0");
  EXPECT_EQ(named.devices[2].node, "b");
  // Inferred: links of at least node_bandwidth_gbps (100 unless given)
  // join devices, also through each other.
  Cluster inferred =
      parsed("devices { name: \"g\" region: \"x\" count: 3 }\n"
             "devices { name: \"h\" region: \"y\" }\n"
             "intra_region { delay_ms: 0.1 bandwidth_gbps: 100 }\n"
             "inter_region_default { delay_ms: 1 bandwidth_gbps: 99 }");
  EXPECT_EQ(inferred.devices[0].node, "node0");
  EXPECT_EQ(inferred.devices[2].node, "node0");
  EXPECT_EQ(inferred.devices[3].node, "node1");
  Cluster slower = parsed("devices { name: \"g\" region: \"x\" count: 2 }\n"
                          "intra_region { delay_ms: 0.1 bandwidth_gbps: 100 }\n"
                          "node_bandwidth_gbps: 200");
  EXPECT_NE(slower.devices[0].node, slower.devices[1].node);
  EXPECT_EQ(parseError("devices { name: \"a\" }\nnode_bandwidth_gbps: -1"),
            "c.textproto: node_bandwidth_gbps must be finite and > 0, got "
            "-1.000000");
}

TEST(ClusterFile, TensorParallelGroupsStayInsideNodes) {
  Cluster cluster =
      parsed("devices { name: \"a\" region: \"r\" count: 4 node: \"n0\" }\n"
             "devices { name: \"b\" region: \"r\" count: 3 node: \"n1\" "
             "peak_flops: 1e12 memory_bytes: 4e9 }\n"
             "devices { name: \"c\" region: \"r\" peak_flops: 1e12 }\n"
             "intra_region { delay_ms: 0.1 bandwidth_gbps: 400 }");
  for (Device &d : cluster.devices)
    if (d.peakFlops == 0) {
      d.peakFlops = 2e12;
      d.memoryBytes = 8e9;
    }
  cluster.bandwidthGbps(indexOf(cluster, "a3"), indexOf(cluster, "b1")) = 7;
  cluster.bandwidthGbps(indexOf(cluster, "b1"), indexOf(cluster, "a3")) = 7;
  std::vector<std::vector<int>> groups;
  std::string error;
  ASSERT_TRUE(tensorParallelGroups(cluster, 2, groups, error)) << error;
  // n0 gives two groups, n1 one (b2 is left over), c none.
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1], (std::vector<int>{2, 3}));
  EXPECT_EQ(groups[2], (std::vector<int>{4, 5}));
  Cluster grouped = groupCluster(cluster, groups);
  ASSERT_EQ(grouped.size(), 3u);
  EXPECT_EQ(grouped.devices[2].name, "b0");
  EXPECT_EQ(grouped.devices[2].speed(), 1e12); // the slowest member
  EXPECT_EQ(grouped.devices[2].memoryBytes, 4e9);
  // Rank 1 of group 1 (a3) to rank 1 of group 2 (b1) is the slow pair.
  EXPECT_EQ(grouped.bandwidthGbps(1, 2), 7);
  EXPECT_EQ(grouped.bandwidthGbps(0, 2), 400);
  EXPECT_FALSE(tensorParallelGroups(cluster, 8, groups, error));
  EXPECT_EQ(error, "tensor parallelism stays inside a node, and no node of "
                   "cluster '' has 8 devices (the largest has 4)");
}

TEST(ClusterFile, WrittenClusterReadsBackToTheSameFingerprint) {
  // Inferred nodes, a memory bandwidth, and links no short decimal holds.
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadClusterFile(presetPath("dc-spot"), c, error)) << error;
  c.devices[1].memoryBandwidth = 9e11;
  c.delayMs(0, 1) = c.delayMs(1, 0) = 0.1 + 0.2;
  c.bandwidthGbps(2, 3) = c.bandwidthGbps(3, 2) = 1.0 / 3;
  std::string path = ::testing::TempDir() + "/written.textproto";
  ASSERT_TRUE(writeClusterFile(c, path, error)) << error;
  Cluster back;
  ASSERT_TRUE(loadClusterFile(path, back, error)) << error;
  EXPECT_EQ(clusterFingerprint(back), clusterFingerprint(c));
  ASSERT_EQ(back.size(), c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    EXPECT_EQ(back.devices[i].name, c.devices[i].name);
    EXPECT_EQ(back.devices[i].node, c.devices[i].node);
    EXPECT_EQ(back.devices[i].memoryBandwidth, c.devices[i].memoryBandwidth);
    for (size_t j = 0; j < c.size(); ++j) {
      EXPECT_EQ(back.delayMs(i, j), c.delayMs(i, j));
      EXPECT_EQ(back.bandwidthGbps(i, j), c.bandwidthGbps(i, j));
    }
  }
  EXPECT_FALSE(writeClusterFile(c, "/nonexistent-dir/x.textproto", error));
  EXPECT_NE(error.find("/nonexistent-dir/x.textproto"), std::string::npos)
      << error;
}

TEST(ClusterFile, LinksByClassGiveEveryLinkExactly) {
  auto expandedMatches = [](const Cluster &c, const LinkClasses &links) {
    Cluster back;
    back.devices = c.devices;
    std::string error;
    EXPECT_TRUE(expandLinkClasses(links, back, error)) << error;
    for (size_t i = 0; i < c.size(); ++i)
      for (size_t j = 0; j < c.size(); ++j) {
        EXPECT_EQ(back.delayMs(i, j), c.delayMs(i, j)) << i << " " << j;
        EXPECT_EQ(back.bandwidthGbps(i, j), c.bandwidthGbps(i, j));
      }
    EXPECT_EQ(clusterFingerprint(back), clusterFingerprint(c));
  };
  // By region: two regions of two.
  Cluster regions = parsed(
      "name: \"r\"\n"
      "devices { name: \"a\" region: \"A\" count: 2 peak_flops: 1e12 }\n"
      "devices { name: \"b\" region: \"B\" count: 2 peak_flops: 1e12 }\n"
      "intra_region { delay_ms: 1 bandwidth_gbps: 10 }\n"
      "region_links { a: \"A\" b: \"B\" delay_ms: 50 bandwidth_gbps: 1 }\n");
  LinkClasses links;
  ASSERT_TRUE(linksByClass(regions, links));
  EXPECT_EQ(links.classOf, (std::vector<uint32_t>{0, 0, 1, 1}));
  EXPECT_EQ(links.delayMs, (std::vector<double>{1, 50, 50, 1}));
  EXPECT_EQ(links.bandwidthGbps, (std::vector<double>{10, 1, 1, 10}));
  expandedMatches(regions, links);
  // One link between the regions differs (and the nodes are the regions'
  // here): no classes at all.
  regions.bandwidthGbps(0, 2) = regions.bandwidthGbps(2, 0) = 3;
  EXPECT_FALSE(linksByClass(regions, links));
  // By node where the region's links differ between its nodes.
  Cluster nodes = parsed(
      "name: \"n\"\n"
      "devices { name: \"a\" region: \"A\" node: \"n0\" count: 2 "
      "peak_flops: 1e12 }\n"
      "devices { name: \"b\" region: \"A\" node: \"n1\" count: 2 "
      "peak_flops: 1e12 }\n"
      "intra_region { delay_ms: 1 bandwidth_gbps: 10 }\n");
  nodes.bandwidthGbps(0, 1) = nodes.bandwidthGbps(1, 0) = 100;
  nodes.bandwidthGbps(2, 3) = nodes.bandwidthGbps(3, 2) = 100;
  ASSERT_TRUE(linksByClass(nodes, links));
  EXPECT_EQ(links.classOf, (std::vector<uint32_t>{0, 0, 1, 1}));
  EXPECT_EQ(links.bandwidthGbps, (std::vector<double>{100, 10, 10, 100}));
  expandedMatches(nodes, links);
  // Hostile classes: out of range, too few, links not C x C.
  Cluster back;
  back.devices = nodes.devices;
  std::string error;
  LinkClasses bad = links;
  bad.classOf[3] = 2;
  EXPECT_FALSE(expandLinkClasses(bad, back, error));
  EXPECT_NE(error.find("C x C links (C = 2)"), std::string::npos) << error;
  bad = links;
  bad.classOf.pop_back();
  EXPECT_FALSE(expandLinkClasses(bad, back, error));
  bad = links;
  bad.delayMs.pop_back();
  EXPECT_FALSE(expandLinkClasses(bad, back, error));
  EXPECT_NE(error.find("got 4 classes and 3 and 4 links"), std::string::npos)
      << error;
}

TEST(ClusterFile, WithoutDevicesKeepsTheRestAndTheirLinks) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadClusterFile(presetPath("geo-regional"), c, error)) << error;
  Cluster less = withoutDevices(c, {c.devices[0].name, c.devices[5].name});
  ASSERT_EQ(less.size(), c.size() - 2);
  EXPECT_EQ(less.devices[0].name, c.devices[1].name);
  EXPECT_EQ(less.devices[4].name, c.devices[6].name);
  for (size_t i = 0; i < less.size(); ++i)
    for (size_t j = 0; j < less.size(); ++j) {
      size_t a = indexOf(c, less.devices[i].name);
      size_t b = indexOf(c, less.devices[j].name);
      EXPECT_EQ(less.delayMs(i, j), c.delayMs(a, b));
      EXPECT_EQ(less.bandwidthGbps(i, j), c.bandwidthGbps(a, b));
    }
  EXPECT_TRUE(less.validate(error)) << error;
}

TEST(ClusterFile, AJoiningDeviceTakesTheLinksOfTheOneItIsLike) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(loadClusterFile(presetPath("geo-regional"), c, error)) << error;
  JoinRequest request;
  ASSERT_TRUE(parseJoinRequest(
      "device { name: \"new0\" region: \"x\" peak_flops: 2e12 memory_bytes: "
      "1e9 }\nlinks_like: \"" + c.devices[3].name + "\"\n",
      "join.textproto", request, error))
      << error;
  Cluster grown;
  ASSERT_TRUE(withJoinedDevice(c, request, grown, error)) << error;
  size_t n = c.size();
  ASSERT_EQ(grown.size(), n + 1);
  EXPECT_EQ(grown.devices[n].name, "new0");
  EXPECT_EQ(grown.devices[n].node, "new0");
  double fastest = 0, itsDelay = 0;
  for (size_t j = 0; j < n; ++j) {
    if (j != 3) {
      EXPECT_EQ(grown.bandwidthGbps(n, j), c.bandwidthGbps(3, j));
      EXPECT_EQ(grown.delayMs(j, n), c.delayMs(j, 3));
      if (c.bandwidthGbps(3, j) > fastest) {
        fastest = c.bandwidthGbps(3, j);
        itsDelay = c.delayMs(3, j);
      }
    }
    for (size_t k = 0; k < n; ++k)
      EXPECT_EQ(grown.delayMs(j, k), c.delayMs(j, k));
  }
  EXPECT_EQ(grown.bandwidthGbps(n, 3), fastest);
  EXPECT_EQ(grown.delayMs(3, n), itsDelay);
  EXPECT_TRUE(grown.validate(error)) << error;

  // Taken names and unknown devices to copy.
  request.device.name = c.devices[0].name;
  EXPECT_FALSE(withJoinedDevice(c, request, grown, error));
  EXPECT_EQ(error, "device '" + c.devices[0].name +
                       "' is in the cluster already");
  request.device.name = "new1";
  request.linksLike = "nobody";
  EXPECT_FALSE(withJoinedDevice(c, request, grown, error));
  EXPECT_EQ(error, "links_like: no device 'nobody' in the cluster");
}

TEST(ClusterFile, HostileJoinRequestsAreRefusedInOneLine) {
  struct Case {
    const char *text, *error;
  } cases[] = {
      {"device { name: \"a\" peak_flops: 1e12 memory_bytes: 1e9 }",
       "j: links_like names no device whose links the joining device takes"},
      {"device { name: \"a/../b\" peak_flops: 1e12 memory_bytes: 1e9 } "
       "links_like: \"c\"",
       "j: the joining device's name 'a/../b' is not letters, digits, '_', "
       "'-' and '.' (at most 128, not starting with '.'): device names become file names"},
      {"device { name: \".hidden\" peak_flops: 1e12 memory_bytes: 1e9 } "
       "links_like: \"c\"",
       "j: the joining device's name '.hidden' is not letters, digits, '_', "
       "'-' and '.' (at most 128, not starting with '.'): device names become file names"},
      {"device { name: \"a\" count: 2 peak_flops: 1e12 memory_bytes: 1e9 } "
       "links_like: \"c\"",
       "j: device a: a join request names one device (count 1)"},
      {"device { name: \"a\" peak_flops: nan memory_bytes: 1e9 } "
       "links_like: \"c\"",
       "j: device a: peak_flops and memory_bytes must be positive and "
       "finite"},
      {"device { name: \"a\" peak_flops: 1e12 memory_bytes: 1e9 "
       "efficiency: 2 } links_like: \"c\"",
       "j: device a: efficiency must be in (0, 1]"},
      {"device { peak_flops: 1e12 }", "j: the joining device has no name"},
      {"device {", "j:1:9: Expected identifier, got: "},
  };
  for (const Case &c : cases) {
    JoinRequest request;
    std::string error;
    EXPECT_FALSE(parseJoinRequest(c.text, "j", request, error)) << c.text;
    EXPECT_EQ(error, c.error) << c.text;
  }
}
