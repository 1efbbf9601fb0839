# -*- Python -*-
# lit configuration of dtfm's regression tests (test/).

import os

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "DTFM"
# The internal shell provides `not` (Debian ships no llvm `not` binary).
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Unit", "lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt",
                   "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dtfm_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
llvm_config.with_system_environment(["HOME", "TMP", "TEMP", "PATH"])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.use_default_substitutions()

# PyTorch, ONNX and friends live under Debian's interpreter, not the first
# python3 on PATH.
torch_python = "/usr/bin/python3"
config.substitutions.append(("%torch_python", torch_python))
config.substitutions.append(("%dtfm_src_root", config.dtfm_src_root))
config.substitutions.append(("%dtfm_obj_root", config.dtfm_obj_root))
config.substitutions.append(("%cmake_generator", config.cmake_generator))
config.substitutions.append(("%cmake", config.cmake_command))
config.substitutions.append(("%cxx", config.cxx_compiler))

# Headless Chromium renders the plan report (scripts/setup.sh installs it).
import shutil
if shutil.which("chromium"):
    config.available_features.add("chromium")

# Debian's libonnx-testdata (scripts/setup.sh installs it): single-op models.
if os.path.isdir("/usr/share/libonnx-testdata/data/node"):
    config.available_features.add("onnx-testdata")

# The CUDA backend: built (tests of --backend), and a GPU to run it on (the
# GPU tests; without one lit reports them UNSUPPORTED).
if config.dtfm_enable_cuda.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("cuda-built")
    import subprocess
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                                text=True, timeout=30)
        if listed.returncode == 0 and "GPU" in listed.stdout:
            config.available_features.add("cuda-device")
    except (OSError, subprocess.SubprocessError):
        pass
else:
    config.available_features.add("cuda-off")

# A build with sanitizers (scripts/sanitize.sh): shadow memory and
# quarantines make memory measurements meaningless.
if config.dtfm_sanitizer:
    config.available_features.add("sanitizer")

# Sailor's two experiments as dtfm cluster files live beside the source tree
# (../shared/clusters, or $DTFM_CLUSTERS_DIR), never in it: tests that plan
# on them REQUIRE sailor-clusters.
clusters_dir = os.environ.get(
    "DTFM_CLUSTERS_DIR",
    os.path.join(os.path.dirname(config.dtfm_src_root), "shared", "clusters"))
if all(os.path.isfile(os.path.join(clusters_dir, f"sailor-{name}.textproto"))
       for name in ("geo", "het")):
    config.available_features.add("sailor-clusters")
    config.substitutions.append(("%sailor_clusters", clusters_dir))
    config.environment["DTFM_CLUSTERS_DIR"] = clusters_dir

# A Redis server to start, and a one-node SLURM (munged, slurmctld and a
# slurmd, which starts tasks only as root): scripts/setup.sh installs them;
# without them lit reports the launch tests UNSUPPORTED.
if shutil.which("redis-server"):
    config.available_features.add("redis")
if all(shutil.which(t) for t in ("munged", "slurmctld", "slurmd", "srun",
                                  "sinfo", "scontrol")) and os.geteuid() == 0:
    config.available_features.add("slurm")

# A private network namespace with loopback up (root, iproute2): the
# launch tests give a worker a host with no address but loopback, then one
# more (Runtime/launch-interfaces.test).
try:
    import subprocess
    if shutil.which("ip") and subprocess.run(
            ["unshare", "-n", "sh", "-c", "ip link set lo up"],
            capture_output=True, timeout=30).returncode == 0:
        config.available_features.add("net-namespace")
except (OSError, subprocess.SubprocessError):
    pass

# A private mount namespace (root): the runtime bundle's tests hide this
# machine's libraries in one (Tools/bundle-runtime.test).
try:
    import subprocess
    if subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                      capture_output=True, timeout=30).returncode == 0:
        config.available_features.add("mount-namespace")
except (OSError, subprocess.SubprocessError):
    pass

tool_dirs = [config.dtfm_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["dtfm-opt", "dtfm-translate", "dtfm-run", "dtfm-data"],
                                   tool_dirs)
# The fuzz targets (fuzz/), run on their seeds and past crashes (test/Fuzz).
llvm_config.add_tool_substitutions(
    ["dtfm-%s-fuzzer" % t for t in ("cluster", "plan", "checkpoint",
                                    "weights", "mlir", "onnx")], tool_dirs)
# The benches (bench/), for their command-line errors (Tools/bench-flags.test)
# and bench-data for the loader's memory (Runtime/execute-data.test);
# bench-cuda is built only with the CUDA backend.
bench_tools = ["bench-data", "bench-hetero", "bench-paper", "bench-scheduler",
               "bench-shape"]
if "cuda-built" in config.available_features:
    bench_tools.append("bench-cuda")
llvm_config.add_tool_substitutions(bench_tools, tool_dirs)
