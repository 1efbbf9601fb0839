//===- FileIoTest.cpp - Inputs read and outputs written safely ------------===//

#include "dtfm/Format/FileIo.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <dirent.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace dtfm::format;

namespace {

/// A fresh folder of its own per test, removed at the end.
struct Folder {
  std::string path;
  Folder() {
    char name[] = "/tmp/dtfm-fileio-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~Folder() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string &name) const {
    return path + "/" + name;
  }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto &e : std::filesystem::directory_iterator(path))
      names.insert(e.path().filename().string());
    return names;
  }
};

std::string contents(const std::string &path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(FileIo, WritesReplaceOnlyWhatTheyCreated) {
  Folder dir;
  std::string out = dir / "out.json", target = dir / "target.txt";
  std::ofstream(target) << "keep me\n";
  // A link planted where a temporary could be is never followed: the
  // temporary is a fresh name created exclusively.
  ASSERT_EQ(::symlink(target.c_str(), (out + ".tmp").c_str()), 0);
  std::string error;
  ASSERT_TRUE(writeFileAtomically(out, "new\n", error)) << error;
  EXPECT_EQ(contents(out), "new\n");
  EXPECT_EQ(contents(target), "keep me\n");
  // Durable or not, nothing is left beside the output.
  ASSERT_TRUE(writeFileAtomically(out, "again\n", error, /*durable=*/true))
      << error;
  EXPECT_EQ(contents(out), "again\n");
  EXPECT_EQ(dir.entries(),
            (std::set<std::string>{"out.json", "out.json.tmp", "target.txt"}));
  // The output itself a link: refused, the link and its target kept.
  std::string link = dir / "link.json";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(writeFileAtomically(link, "x", error));
  EXPECT_EQ(error, "'" + link +
                       "' is a symbolic link: dtfm does not replace it (name "
                       "a regular file)");
  EXPECT_EQ(contents(target), "keep me\n");
}

TEST(FileIo, OutputFoldersAreCheckedBeforeAnyWork) {
  Folder dir;
  EXPECT_EQ(outputPathProblem(dir / "new.bin"), "");
  EXPECT_EQ(outputPathProblem(dir / "missing/w.bin"),
            "cannot write '" + dir / "missing/w.bin" + "': its folder '" +
                dir / "missing" + "' does not exist");
  std::ofstream(dir / "file") << "x";
  EXPECT_EQ(outputPathProblem(dir / "file/w.bin"),
            "cannot write '" + dir / "file/w.bin" + "': '" + dir / "file" +
                "' is not a folder");
  ASSERT_EQ(::mkdir((dir / "sub").c_str(), 0755), 0);
  EXPECT_EQ(outputPathProblem(dir / "sub"),
            "'" + dir / "sub" +
                "' is a directory: dtfm does not replace it (name a regular "
                "file)");
  EXPECT_EQ(outputPathProblem("/dev/null"), "");
  EXPECT_EQ(outputPathProblem("relative-name-in-cwd.bin"), "");
}

TEST(FileIo, FifosAreRefusedAsInputsAndNeverWaitedOn) {
  Folder dir;
  std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  std::string bytes, error;
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(readWholeFile(fifo, bytes, error));
  EXPECT_EQ(error, fifo + ": is a FIFO, not a regular file");
  EXPECT_EQ(openRegularFile(dir.path, error), -1);
  EXPECT_EQ(error, dir.path + ": is a directory, not a regular file");
  // As an output, a FIFO nobody reads is an error, not a hang.
  EXPECT_FALSE(writeFileAtomically(fifo, "x", error));
  EXPECT_EQ(error, "cannot write '" + fifo + "' (no process reads the FIFO)");
  EXPECT_EQ(openLogFile(fifo, false, error), nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_FALSE(readWholeFile(dir / "none", bytes, error));
  EXPECT_EQ(error, dir / "none" + ": cannot open (No such file or directory)");
}

TEST(FileIo, ReadsAreBounded) {
  Folder dir;
  std::ofstream(dir / "big") << std::string(1000, 'x');
  std::string bytes, error;
  ASSERT_TRUE(readWholeFile(dir / "big", bytes, error, 1000)) << error;
  EXPECT_EQ(bytes.size(), 1000u);
  EXPECT_FALSE(readWholeFile(dir / "big", bytes, error, 999));
  EXPECT_EQ(error, dir / "big" +
                       ": larger than the 999 bytes such a file may have");
}

TEST(FileIo, LogsAreOpenedWithoutFollowingLinks) {
  Folder dir;
  std::string log = dir / "run.log.jsonl", target = dir / "target.txt";
  std::ofstream(target) << "keep me\n";
  std::string error;
  std::FILE *f = openLogFile(log, false, error);
  ASSERT_NE(f, nullptr) << error;
  std::fputs("one\n", f);
  std::fclose(f);
  f = openLogFile(log, true, error);
  ASSERT_NE(f, nullptr) << error;
  std::fputs("two\n", f);
  std::fclose(f);
  EXPECT_EQ(contents(log), "one\ntwo\n");
  f = openLogFile(log, false, error);
  ASSERT_NE(f, nullptr) << error;
  std::fclose(f);
  EXPECT_EQ(contents(log), "");
  std::string link = dir / "link.jsonl";
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_EQ(openLogFile(link, true, error), nullptr);
  EXPECT_EQ(error, "'" + link +
                       "' is a symbolic link: dtfm does not replace it (name "
                       "a regular file)");
  EXPECT_EQ(contents(target), "keep me\n");
}

TEST(FileIo, AnOutputThatIsAnInputIsFoundByNameOrByFile) {
  Folder dir;
  std::string plan = dir / "plan.pb", other = dir / "other.pb";
  std::ofstream(plan) << "p";
  std::ofstream(other) << "o";
  ASSERT_EQ(::link(plan.c_str(), (dir / "hard.pb").c_str()), 0);
  ASSERT_EQ(::symlink(plan.c_str(), (dir / "soft.pb").c_str()), 0);
  EXPECT_EQ(outputThatIsAnInput({{"--log", plan}}, {{"the plan", plan}}),
            "--log '" + plan + "' is the plan '" + plan +
                "', an input of this run: writing it would destroy it (name "
                "another file)");
  EXPECT_NE(outputThatIsAnInput({{"--save-params", dir / "hard.pb"}},
                                {{"--inputs", ""}, {"the plan", plan}}),
            "");
  EXPECT_NE(outputThatIsAnInput({{"--trace", dir / "soft.pb"}},
                                {{"the plan", plan}}),
            "");
  EXPECT_EQ(outputThatIsAnInput({{"--log", other}, {"--trace", ""}},
                                {{"the plan", plan}}),
            "");
  EXPECT_EQ(outputThatIsAnInput({{"--trace", "/dev/null"}},
                                {{"--inputs", "/dev/null"}}),
            "");
  EXPECT_EQ(outputThatIsAnInput({{"--log", dir / "new.jsonl"}},
                                {{"--data", dir / "new.jsonl.missing"}}),
            "");
}

TEST(FileIo, DeviceNamesThatBecomeFileNames) {
  for (const char *good : {"cpu0", "c1a_a100_vm0_g", "us-east.gpu-3", "A"})
    EXPECT_TRUE(isFileSafeDeviceName(good)) << good;
  for (const std::string bad :
       {std::string(), std::string("../../pwned"), std::string(".hidden"),
        std::string("a/b"), std::string("a b"), std::string("a\0b", 3),
        std::string(129, 'x')})
    EXPECT_FALSE(isFileSafeDeviceName(bad)) << bad;
}

} // namespace
