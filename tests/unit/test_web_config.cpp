// --web.config.file: the exporter-toolkit's format as memlat reads it, the Authorization
// header, and bcrypt (builds with MEMLAT_TLS).
#include <gtest/gtest.h>

#include "base/errors.h"
#include "prometheus/web_config.h"

using namespace memlat;

namespace {

// A hash of "s3cret" made by libxcrypt (python3: crypt.crypt("s3cret",
// crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=1024))).
const std::string kHash = "$2b$10$KsohfmIxCOQm8Zs3d4ef5eS5A6hYBDDs4RvzWKU4AkM0Vj65.Tz2S";

std::string usage_error(std::string_view text) {
    try {
        parse_web_config(text, "/etc/memlat/web.yml");
    } catch (const UsageError &e) {
        return e.what();
    }
    return "";
}

} // namespace

TEST(WebConfig, ReadsTlsAndUsers) {
    const WebConfig c = parse_web_config("# node_exporter's example\n"
                                         "tls_server_config:\n"
                                         "  cert_file: server.crt\n"
                                         "  key_file: /keys/server.key   # absolute\n"
                                         "\n"
                                         "basic_auth_users:\n"
                                         "  prometheus: " +
                                             kHash + "\n" + "  'other': \"" + kHash + "\"\n",
                                         "/etc/memlat/web.yml");
    EXPECT_TRUE(c.tls());
    EXPECT_EQ(c.cert_file, "/etc/memlat/server.crt"); // relative to the file's directory
    EXPECT_EQ(c.key_file, "/keys/server.key");
    ASSERT_EQ(c.users.size(), 2u);
    EXPECT_EQ(c.users.at("prometheus"), kHash);
    EXPECT_EQ(c.users.at("other"), kHash);
}

TEST(WebConfig, AuthWithoutTlsAndAnEmptyFile) {
    const WebConfig auth = parse_web_config("basic_auth_users:\n  a: " + kHash + "\n", "w.yml");
    EXPECT_FALSE(auth.tls());
    EXPECT_EQ(auth.users.size(), 1u);
    const WebConfig empty = parse_web_config("# nothing\n---\n", "w.yml");
    EXPECT_FALSE(empty.tls());
    EXPECT_TRUE(empty.users.empty());
}

TEST(WebConfig, RefusesWhatItDoesNotImplementByName) {
    EXPECT_NE(usage_error("tls_server_config:\n  cert_file: a\n  key_file: b\n"
                          "  client_ca_file: ca.pem\n")
                  .find("tls_server_config.client_ca_file"),
              std::string::npos);
    EXPECT_NE(usage_error("http_server_config:\n  http2: false\n").find("http_server_config"),
              std::string::npos);
    EXPECT_NE(usage_error("tls_server_config:\n  cert_file: a\n").find("both cert_file and"),
              std::string::npos);
    EXPECT_NE(usage_error("basic_auth_users:\n  a: plaintext\n").find("not a bcrypt hash"),
              std::string::npos);
    EXPECT_NE(usage_error("basic_auth_users:\n  a: " + kHash + "\n  a: " + kHash + "\n")
                  .find("given twice"),
              std::string::npos);
    EXPECT_NE(usage_error("tls_server_config:\n\tcert_file: a\n").find("line 2"),
              std::string::npos);
    EXPECT_NE(usage_error("  cert_file: a\n").find("under no section"), std::string::npos);
    EXPECT_NE(usage_error("tls_server_config: x\n").find("a section"), std::string::npos);
    EXPECT_NE(usage_error("basic_auth_users:\n  - a\n").find("line 2"), std::string::npos);
    EXPECT_NE(usage_error("basic_auth_users:\n  a: 'open\n").find("not closed"), std::string::npos);
}

TEST(WebConfig, BasicAuthorizationHeader) {
    std::string user, password;
    // "prom:s3cret", with base64 padding; user names are taken up to the first colon.
    ASSERT_TRUE(parse_basic_authorization("Basic cHJvbTpzM2NyZXQ=", user, password));
    EXPECT_EQ(user, "prom");
    EXPECT_EQ(password, "s3cret");
    ASSERT_TRUE(parse_basic_authorization("basic  YTpiOmM=", user, password)); // "a:b:c"
    EXPECT_EQ(user, "a");
    EXPECT_EQ(password, "b:c");
    EXPECT_FALSE(parse_basic_authorization("", user, password));
    EXPECT_FALSE(parse_basic_authorization("Bearer abc", user, password));
    EXPECT_FALSE(parse_basic_authorization("Basic !!!!", user, password));
    EXPECT_FALSE(parse_basic_authorization("Basic bm9jb2xvbg==", user, password)); // "nocolon"
}

TEST(WebConfig, NoUsersLetsEveryoneIn) {
    BasicAuth open({});
    EXPECT_FALSE(open.required());
    EXPECT_TRUE(open.allows(""));
}

#ifdef MEMLAT_TLS
TEST(WebConfig, Bcrypt) {
    EXPECT_TRUE(bcrypt_matches(kHash, "s3cret"));
    EXPECT_FALSE(bcrypt_matches(kHash, "s3creT"));
    EXPECT_FALSE(bcrypt_matches(kHash, ""));
    // $2y$ (htpasswd's) is the same algorithm.
    EXPECT_TRUE(bcrypt_matches("$2y$" + kHash.substr(4), "s3cret"));
    EXPECT_FALSE(bcrypt_matches("$6$salt$notbcrypt", "s3cret"));
}

TEST(WebConfig, BasicAuthChecksUserAndPassword) {
    BasicAuth auth({{"prom", kHash}});
    EXPECT_TRUE(auth.required());
    EXPECT_FALSE(auth.allows(""));
    EXPECT_FALSE(auth.allows("Basic cHJvbTp3cm9uZw==")); // prom:wrong
    EXPECT_FALSE(auth.allows("Basic b3RoZXI6czNjcmV0")); // other:s3cret
    EXPECT_TRUE(auth.allows("Basic cHJvbTpzM2NyZXQ="));  // prom:s3cret
    EXPECT_TRUE(auth.allows("Basic cHJvbTpzM2NyZXQ="));  // remembered
    EXPECT_FALSE(auth.allows("Basic cHJvbTp3cm9uZw=="));
}
#endif
