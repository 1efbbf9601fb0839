// RUN: dtfm-opt %s -split-input-file --dtfm-import-cluster=file=%S/Inputs/chain-3.textproto | FileCheck %s
// RUN: dtfm-translate --import-cluster %S/Inputs/chain-3.textproto | dtfm-opt | FileCheck %s
// RUN: not dtfm-opt %s -split-input-file --dtfm-import-cluster 2>&1 | FileCheck %s --check-prefix=NOFILE
// RUN: not dtfm-opt %s -split-input-file --dtfm-import-cluster=file=%S/Inputs/missing.textproto 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not dtfm-translate --import-cluster %S/Inputs/missing.textproto 2>&1 | FileCheck %s --check-prefix=TRANSLATE-MISSING
// RUN: not dtfm-opt %s -split-input-file --dtfm-import-cluster=file=%S/Inputs/zero-bandwidth.textproto 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: dtfm-opt %s -split-input-file --dtfm-import-cluster=file=%S/Inputs/two.textproto | FileCheck %s --check-prefix=REPLACE
// RUN: dtfm-translate --import-cluster %S/Inputs/two-regions.textproto | FileCheck %s --check-prefix=CLASSES
// RUN: dtfm-translate --import-cluster %S/Inputs/two-regions.textproto | dtfm-opt | FileCheck %s --check-prefix=CLASSES

// COM: The cluster file read once into the module: devices, then the n x n
// COM: link matrices row-major (chain-3: a-b fast, b-c and a-c slow).
// CHECK-LABEL: module attributes
// CHECK-SAME: dtfm.cluster = #dtfm.cluster<name = "chain-3", source = "{{.*}}chain-3.textproto",
// CHECK-SAME: devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09, node = "node0">, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09, node = "node1">, <name = "c", region = "C", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09, node = "node2">],
// CHECK-SAME: delay_ms = [0.0, 0.1, 0.1, 0.1, 0.0, 0.1, 0.1, 0.1, 0.0],
// CHECK-SAME: bandwidth_gbps = [0.0, 10.0, 0.1, 10.0, 0.0, 0.1, 0.1, 0.1, 0.0]>

// COM: Where the regions give every link, the links are by class: each
// COM: device's region, then C x C links (a region's own entry: between two
// COM: of its devices), read back as the same n x n links.
// CLASSES: devices = [<name = "a0", region = "A"{{.*}}<name = "b1", region = "B"{{[^>]*}}>],
// CLASSES-SAME: link_classes = [0, 0, 1, 1], delay_ms = [1.0, 50.0, 50.0, 1.0], bandwidth_gbps = [10.0, 1.0, 1.0, 10.0]>

// NOFILE: error: dtfm-import-cluster: no cluster file given (file=<file.textproto>)
// MISSING: missing.textproto:0:0: error: dtfm-import-cluster: {{.*}}missing.textproto: cannot open (No such file or directory)
// TRANSLATE-MISSING: dtfm-translate: error: {{.*}}missing.textproto: cannot open (No such file or directory)
// ZERO: zero-bandwidth.textproto:0:0: error: dtfm-import-cluster: {{.*}}zero-bandwidth.textproto: link

module {
}

// -----

// COM: A module that already has a cluster (and other attributes): the
// COM: imported cluster replaces it; the other attributes stay.
// REPLACE: // -----
// REPLACE: module attributes {dtfm.cluster = #dtfm.cluster<name = "two", source = "{{.*}}two.textproto", devices = [<name = "a", region = "A", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09, node = "node0">, <name = "b", region = "B", peak_flops = 1.0e+12, efficiency = 1.0, memory_bytes = 1.0e+09, node = "node1">], delay_ms = [0.0, 1.0, 1.0, 0.0], bandwidth_gbps = [0.0, 10.0, 10.0, 0.0]>, dtfm.model = "m"}
module attributes {dtfm.model = "m", dtfm.cluster = #dtfm.cluster<name = "old", source = "old.textproto", devices = [<name = "z", region = "Z", peak_flops = 1.0, efficiency = 1.0, memory_bytes = 1.0>], delay_ms = [0.0], bandwidth_gbps = [0.0]>} {
}
