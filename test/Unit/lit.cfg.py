# -*- Python -*-
# lit configuration that runs dtfm's GoogleTest binaries (unittests/).

import os

import lit.formats

config.name = "DTFM-Unit"
config.suffixes = []
config.test_source_root = os.path.join(config.dtfm_obj_root, "unittests")
config.test_exec_root = config.test_source_root
config.test_format = lit.formats.GoogleTest(".", "Tests")
# Tests that read ../shared/scenarios or write temp files find them from here.
config.environment["DTFM_SOURCE_DIR"] = config.dtfm_src_root
