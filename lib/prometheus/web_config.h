// --web.config.file FILE: TLS and basic authentication for the exporter, in the file format of
// the Prometheus exporter-toolkit (node_exporter's), of which memlat reads:
//
//   tls_server_config:
//     cert_file: server.crt      # PEM; relative paths are relative to FILE's directory
//     key_file: server.key
//   basic_auth_users:
//     prometheus: $2y$10$...     # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\n')
//
// A setting memlat does not implement (client certificates, TLS versions and ciphers, HTTP
// headers) is refused with its name rather than ignored: a security setting that silently
// does nothing is worse than none.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace memlat {

struct WebConfig {
    std::string cert_file; // empty: plain HTTP
    std::string key_file;
    std::map<std::string, std::string, std::less<>> users; // name -> bcrypt hash; empty: no auth
    bool tls() const { return !cert_file.empty(); }
};

// Parses the text of a web configuration file; `path` names it in errors and anchors its
// relative file names. A UsageError names the line and what is wrong.
WebConfig parse_web_config(std::string_view text, std::string_view path);
// Reads and parses FILE (a UsageError when it cannot be read).
WebConfig read_web_config(const std::string &path);

// Whether `password` matches the bcrypt `hash` ($2a$, $2b$ or $2y$), in constant time as to
// where the two differ. False for a hash that is not bcrypt.
bool bcrypt_matches(const std::string &hash, std::string_view password);

// The user and password of an "Authorization: Basic BASE64" header value; false when it is
// not one.
bool parse_basic_authorization(std::string_view header, std::string &user, std::string &password);

// Decides whether a request's Authorization header is allowed in. The last password that
// matched is remembered per user (in this process's memory, as the exporter-toolkit does), so
// that a scrape every few seconds costs bcrypt once, not each time (about 50 ms at cost 10);
// a wrong password always pays bcrypt's price.
class BasicAuth {
  public:
    explicit BasicAuth(std::map<std::string, std::string, std::less<>> users);
    bool required() const { return !users_.empty(); }
    bool allows(std::string_view authorization_header);

  private:
    std::map<std::string, std::string, std::less<>> users_;
    std::map<std::string, std::string, std::less<>> remembered_; // user -> password
};

class TlsServer; // tls.h

// What --web.config.file asks of every connection of the exporter: TLS (tls() is null
// without), and a user and password (auth().required()).
class WebAccess {
  public:
    // Reads the certificate and key (a RuntimeError when they cannot be used).
    explicit WebAccess(const WebConfig &config);
    ~WebAccess();
    WebAccess(const WebAccess &) = delete;
    WebAccess &operator=(const WebAccess &) = delete;
    TlsServer *tls() const { return tls_.get(); }
    BasicAuth &auth() { return auth_; }

  private:
    std::unique_ptr<TlsServer> tls_;
    BasicAuth auth_;
};

} // namespace memlat
