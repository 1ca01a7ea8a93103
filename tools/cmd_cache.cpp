#include <ctime>
#include <map>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "graph/Error.h"
#include "runtime/KernelCache.h"
#include "tools/Commands.h"

namespace fusor::cli {

namespace {

std::string size_text(uint64_t bytes) {
    return bytes >= (1u << 30) ? fmt::format("{:.2f} GiB", bytes / double(1u << 30))
           : bytes >= (1u << 20) ? fmt::format("{:.1f} MiB", bytes / double(1u << 20))
                                 : fmt::format("{:.1f} KiB", bytes / 1024.0);
}

std::string time_text(int64_t s) {
    std::time_t t = (std::time_t)s;
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
    return text;
}

const char *mode_name(CacheMode m) {
    return m == CacheMode::ReadWrite ? "read-write" : m == CacheMode::ReadOnly ? "read-only" : "off";
}

int info(bool json) {
    const KernelCacheConfig &c = kernel_cache_config();
    std::map<std::string, std::pair<int, uint64_t>> kinds;  // kind -> entries, bytes
    uint64_t total = 0;
    for (const CacheEntry &e : list_cache(c.dir)) {
        kinds[e.kind].first++;
        kinds[e.kind].second += e.bytes;
        total += e.bytes;
    }
    if (json) {
        nlohmann::json j = {{"dir", c.dir}, {"mode", mode_name(c.mode)}, {"max_bytes", c.max_bytes}, {"bytes", total}};
        if (!c.why_off.empty()) j["why_off"] = c.why_off;
        for (const auto &[kind, n] : kinds) j["entries"][kind] = {{"count", n.first}, {"bytes", n.second}};
        fmt::print("{}\n", j.dump(2));
        return 0;
    }
    fmt::print("kernel cache: {} ({}{})\n", c.dir.empty() ? "-" : c.dir, mode_name(c.mode), c.why_off.empty() ? "" : ": " + c.why_off);
    fmt::print("size: {} of {} (FUSOR_CACHE_MAX)\n", size_text(total), size_text(c.max_bytes ? c.max_bytes : kDefaultCacheMaxBytes));
    for (const auto &[kind, n] : kinds) fmt::print("  {:<8} {:>6} entries  {}\n", kind, n.first, size_text(n.second));
    return 0;
}

int list(bool json) {
    std::vector<CacheEntry> entries = list_cache(kernel_cache_config().dir);
    if (json) {
        nlohmann::json j = nlohmann::json::array();
        for (const CacheEntry &e : entries) j.push_back({{"path", e.path}, {"kind", e.kind}, {"bytes", e.bytes}, {"used", e.used_s}});
        fmt::print("{}\n", j.dump(2));
        return 0;
    }
    fmt::print("{:<8} {:>10}  {:<19}  {}\n", "kind", "size", "last used", "entry (least recently used first)");
    for (const CacheEntry &e : entries) fmt::print("{:<8} {:>10}  {:<19}  {}\n", e.kind, size_text(e.bytes), time_text(e.used_s), e.path);
    return 0;
}

int prune(uint64_t max_bytes, bool json) {
    const std::string &dir = kernel_cache_config().dir;
    if (kernel_cache_config().mode == CacheMode::ReadOnly) throw UserError("fusor cache: '" + dir + "' is another user's cache: read-only");
    uint64_t removed = prune_cache(dir, max_bytes);
    if (json) {
        fmt::print("{}\n", nlohmann::json{{"dir", dir}, {"removed_bytes", removed}}.dump(2));
    } else {
        fmt::print("removed {} from {}\n", size_text(removed), dir);
    }
    return 0;
}

}  // namespace

Verb add_cache(CLI::App &app) {
    CLI::App *cmd = app.add_subcommand("cache", "Show or manage the kernel cache (info, list, clear, prune)");
    cmd->require_subcommand(1);
    auto json = std::make_shared<bool>(false);
    auto max = std::make_shared<std::string>();
    CLI::App *info_cmd = cmd->add_subcommand("info", "Where the cache is, its mode, its size and entries per kind");
    CLI::App *list_cmd = cmd->add_subcommand("list", "Every entry, least recently used first");
    CLI::App *clear_cmd = cmd->add_subcommand("clear", "Remove every entry (a process running from one keeps running)");
    CLI::App *prune_cmd = cmd->add_subcommand("prune", "Remove the least recently used entries down to a size");
    prune_cmd->add_option("--max", *max, "size to keep, e.g. 500M or 1G (default: FUSOR_CACHE_MAX, else 2G)");
    for (CLI::App *c : {info_cmd, list_cmd, clear_cmd, prune_cmd}) c->add_flag("--json", *json, "print JSON");
    return {cmd, [=] {
        if (info_cmd->parsed()) return info(*json);
        if (list_cmd->parsed()) return list(*json);
        if (clear_cmd->parsed()) return prune(0, *json);
        uint64_t keep = kernel_cache_config().max_bytes ? kernel_cache_config().max_bytes : kDefaultCacheMaxBytes;
        if (!max->empty()) {
            std::optional<uint64_t> v = parse_cache_size(*max);
            if (!v) throw UserError("fusor cache prune: --max '" + *max + "' is not a size such as 500M, 1G or 100000000");
            keep = *v;
        }
        return prune(keep, *json);
    }};
}

}  // namespace fusor::cli
