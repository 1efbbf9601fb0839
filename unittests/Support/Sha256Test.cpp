//===- Sha256Test.cpp - SHA-256 and HMAC-SHA256 ---------------------------===//
//
// Part of dtfm.
//
//===----------------------------------------------------------------------===//
//
// The published vectors: FIPS 180-4's examples for SHA-256 and RFC 4231's
// test cases for HMAC-SHA256 (a short key, a key longer than a block, data
// longer than a block), and sizes around the padding's edges against a
// digest computed piecewise.
//
//===----------------------------------------------------------------------===//

#include "dtfm/Support/Sha256.h"

#include "gtest/gtest.h"

#include <string>

using namespace dtfm;

namespace {
std::string hex(const Sha256Digest &d) {
  std::string out;
  appendHex(out, d.data(), d.size());
  return out;
}
} // namespace

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(hex(sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, PiecesEqualTheWhole) {
  // Every length across two blocks' padding edges (55, 56, 63, 64, 119...).
  for (size_t n = 0; n < 140; ++n) {
    std::string text;
    for (size_t i = 0; i < n; ++i)
      text += static_cast<char>('a' + (i * 7) % 26);
    Sha256 pieces;
    for (size_t i = 0; i < n; i += 5)
      pieces.update(std::string_view(text).substr(i, 5));
    EXPECT_EQ(hex(pieces.finish()), hex(sha256(text))) << n;
  }
}

TEST(Sha256Test, Rfc4231HmacVectors) {
  // Case 1: a 20-byte key.
  EXPECT_EQ(hex(hmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Case 2: a short key.
  EXPECT_EQ(hex(hmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Case 6: a key longer than a block (hashed first).
  EXPECT_EQ(hex(hmacSha256(std::string(131, '\xaa'),
                           "Test Using Larger Than Block-Size Key - Hash Key "
                           "First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // Case 7: a long key and data longer than a block.
  EXPECT_EQ(
      hex(hmacSha256(std::string(131, '\xaa'),
                     "This is a test using a larger than block-size key and a "
                     "larger than block-size data. The key needs to be hashed "
                     "before being used by the HMAC algorithm.")),
      "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(Sha256Test, ConstantTimeEquality) {
  EXPECT_TRUE(equalInConstantTime("abc", "abc"));
  EXPECT_FALSE(equalInConstantTime("abc", "abd"));
  EXPECT_FALSE(equalInConstantTime("abc", "ab"));
  EXPECT_TRUE(equalInConstantTime("", ""));
}
