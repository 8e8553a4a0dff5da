#include "prometheus/web_config.h"

#include <cerrno>
#ifdef MEMLAT_TLS
#include <crypt.h>
#endif
#include <fmt/format.h>
#include <vector>

#include <boost/beast/core/detail/base64.hpp>

#include "base/errors.h"
#include "base/files.h"
#include "prometheus/tls.h"

namespace memlat {

namespace {

// A line of the file: its indentation, key and value ("" when the key opens a section).
struct Entry {
    size_t indent = 0;
    std::string key;
    std::string value;
};

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return s;
}

// A scalar as YAML writes it plainly or in quotes; a comment after a plain value goes. Hashes
// hold '$' and '/', never " #", so a plain bcrypt hash reads whole.
std::string scalar(std::string_view text, const std::string &where) {
    text = trim(text);
    if (!text.empty() && (text.front() == '"' || text.front() == '\'')) {
        const char quote = text.front();
        const size_t close = text.find(quote, 1);
        if (close == std::string_view::npos)
            throw UsageError(fmt::format("{}: the quote is not closed", where));
        const std::string_view rest = trim(text.substr(close + 1));
        if (!rest.empty() && rest.front() != '#')
            throw UsageError(fmt::format("{}: text after the closing quote", where));
        const std::string_view inside = text.substr(1, close - 1);
        if (quote == '"' && inside.find('\\') != std::string_view::npos)
            throw UsageError(fmt::format("{}: escapes in double quotes are not read here; use "
                                         "single quotes or none",
                                         where));
        return std::string(inside);
    }
    if (const size_t comment = text.find(" #"); comment != std::string_view::npos)
        text = trim(text.substr(0, comment));
    return std::string(text);
}

std::vector<Entry> entries(std::string_view text, std::string_view path) {
    std::vector<Entry> out;
    std::string_view line;
    for (size_t number = 1; next_line(text, line); ++number) {
        const std::string where = fmt::format("{} line {}", path, number);
        const std::string_view content = trim(line);
        if (content.empty() || content.front() == '#' || content == "---")
            continue;
        if (line.find('\t') < line.find_first_not_of(" \t"))
            throw UsageError(fmt::format("{}: indent with spaces, not tabs", where));
        const size_t colon = content.find(':');
        if (content.front() == '-' || colon == std::string_view::npos || colon == 0)
            throw UsageError(
                fmt::format("{}: expected 'key: value' or 'section:', not '{}'", where, content));
        Entry e;
        e.indent = line.find_first_not_of(' ');
        e.key = scalar(content.substr(0, colon), where);
        e.value = scalar(content.substr(colon + 1), where);
        out.push_back(std::move(e));
    }
    return out;
}

// FILE's relative names are relative to the configuration file's directory.
std::string beside(std::string_view config_path, const std::string &name) {
    if (name.empty() || name.front() == '/')
        return name;
    const size_t slash = config_path.rfind('/');
    return slash == std::string_view::npos ? name
                                           : std::string(config_path.substr(0, slash + 1)) + name;
}

// Whether a == b, taking as long wherever they differ (for secrets).
[[maybe_unused]] bool same_secret(std::string_view a, std::string_view b) {
    if (a.size() != b.size())
        return false;
    unsigned char differs = 0;
    for (size_t i = 0; i < a.size(); ++i)
        differs |= static_cast<unsigned char>(a[i] ^ b[i]);
    return differs == 0;
}

} // namespace

WebConfig parse_web_config(std::string_view text, std::string_view path) {
    WebConfig config;
    std::string section;
    for (const Entry &e : entries(text, path)) {
        const std::string where =
            fmt::format("{}: {}", path, section.empty() ? e.key : section + "." + e.key);
        if (e.indent == 0) {
            if (!e.value.empty())
                throw UsageError(fmt::format("{}: a section, which holds indented lines", where));
            if (e.key != "tls_server_config" && e.key != "basic_auth_users")
                throw UsageError(
                    fmt::format("{}: memlat reads tls_server_config (cert_file, key_file) and "
                                "basic_auth_users; it does not implement {}",
                                path, e.key));
            section = e.key;
            continue;
        }
        if (section.empty())
            throw UsageError(fmt::format("{}: indented, but under no section", where));
        if (e.value.empty())
            throw UsageError(fmt::format("{}: has no value", where));
        if (section == "basic_auth_users") {
            if (!e.value.starts_with("$2a$") && !e.value.starts_with("$2b$") &&
                !e.value.starts_with("$2y$"))
                throw UsageError(fmt::format("{}: not a bcrypt hash ($2y$...; make one with "
                                             "htpasswd -nBC 10 USER)",
                                             where));
            if (!config.users.emplace(e.key, e.value).second)
                throw UsageError(fmt::format("{}: the user is given twice", where));
        } else if (e.key == "cert_file") {
            config.cert_file = beside(path, e.value);
        } else if (e.key == "key_file") {
            config.key_file = beside(path, e.value);
        } else {
            throw UsageError(fmt::format("{}: memlat's TLS takes cert_file and key_file only; "
                                         "it does not implement {}",
                                         path, section + "." + e.key));
        }
    }
    if (config.cert_file.empty() != config.key_file.empty())
        throw UsageError(
            fmt::format("{}: tls_server_config needs both cert_file and key_file", path));
    return config;
}

WebConfig read_web_config(const std::string &path) {
#ifndef MEMLAT_TLS
    throw UsageError(fmt::format("--web.config.file {}: this memlat is built without TLS and "
                                 "basic authentication (cmake -DMEMLAT_TLS=ON adds them)",
                                 path));
#endif
    const auto text = read_text_file(path);
    if (!text)
        throw UsageError(fmt::format("--web.config.file {}: {}", path, error_text(errno)));
    return parse_web_config(*text, path);
}

bool bcrypt_matches(const std::string &hash, [[maybe_unused]] std::string_view password) {
    if (!hash.starts_with("$2a$") && !hash.starts_with("$2b$") && !hash.starts_with("$2y$"))
        return false;
#ifdef MEMLAT_TLS
    // crypt_rn() hashes the password with the hash's own salt and cost; the result equals
    // the hash exactly when the password is right.
    auto data = std::make_unique<crypt_data>();
    const std::string phrase(password);
    const char *result = crypt_rn(phrase.c_str(), hash.c_str(), data.get(), sizeof(*data));
    return result != nullptr && result[0] != '*' && same_secret(result, hash);
#else
    return false; // no build without TLS reads a configuration with users
#endif
}

bool parse_basic_authorization(std::string_view header, std::string &user, std::string &password) {
    header = trim(header);
    constexpr std::string_view scheme = "Basic ";
    if (header.size() <= scheme.size() ||
        !std::equal(scheme.begin(), scheme.end(), header.begin(),
                    [](char a, char b) { return std::tolower(a) == std::tolower(b); }))
        return false;
    std::string_view encoded = trim(header.substr(scheme.size()));
    // Beast's decoder stops at the padding: take it off first, and every other character must
    // be read.
    for (int pad = 0; pad < 2 && encoded.ends_with('='); ++pad)
        encoded.remove_suffix(1);
    namespace base64 = boost::beast::detail::base64;
    std::string decoded(encoded.size() / 4 * 3 + 3,
                        '\0'); // decoded_size() counts whole groups only
    const auto [written, read] = base64::decode(decoded.data(), encoded.data(), encoded.size());
    if (read != encoded.size())
        return false;
    decoded.resize(written);
    const size_t colon = decoded.find(':');
    if (colon == std::string::npos)
        return false;
    user = decoded.substr(0, colon);
    password = decoded.substr(colon + 1);
    return true;
}

BasicAuth::BasicAuth(std::map<std::string, std::string, std::less<>> users)
    : users_(std::move(users)) {}

bool BasicAuth::allows([[maybe_unused]] std::string_view authorization_header) {
    if (users_.empty())
        return true;
#ifndef MEMLAT_TLS
    return false; // users come only from read_web_config(), which needs MEMLAT_TLS: fail closed
#else
    std::string user, password;
    if (!parse_basic_authorization(authorization_header, user, password))
        return false;
    const auto known = users_.find(user);
    if (known == users_.end())
        return false;
    if (const auto last = remembered_.find(user);
        last != remembered_.end() && same_secret(last->second, password))
        return true;
    if (!bcrypt_matches(known->second, password))
        return false;
    remembered_[user] = password;
    return true;
#endif
}

WebAccess::WebAccess(const WebConfig &config)
    : tls_(config.tls() ? std::make_unique<TlsServer>(config.cert_file, config.key_file) : nullptr),
      auth_(config.users) {}

WebAccess::~WebAccess() = default;

} // namespace memlat
