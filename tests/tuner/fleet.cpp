// The fleet's pieces that need no server: --shard K/N (parsing, the static cost estimate and the
// deterministic split), and database locations (which engine, and passwords kept out of
// messages). The PostgreSQL engine itself is tested against a real server in tests/fleet/.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "graph/Clustering.h"
#include "graph/JsonFormat.h"
#include "tuner/Shard.h"
#include "tuner/db/Signature.h"
#include "tuner/db/TuningDb.h"

using namespace fusor;

TEST_CASE("shard: K/N parses, and anything else is refused naming the flag", "[tuner][fleet]") {
    Shard s = parse_shard("3/8");
    CHECK(s.index == 3);
    CHECK(s.count == 8);
    CHECK(parse_shard("0/1").count == 1);
    for (const char *bad : {"2/2", "0/0", "-1/2", "a/b", "1", "1/", "/2", "1/2/3", " 1/2", "0/100001"}) {
        INFO(bad);
        try {
            parse_shard(bad);
            FAIL("accepted");
        } catch (const UserError &e) {
            CHECK_THAT(e.what(), Catch::StartsWith(std::string("--shard '") + bad + "'"));
        }
    }
}

TEST_CASE("shard: a matmul's static cost counts its multiply-adds and its traffic", "[tuner][fleet]") {
    Graph g = parse_graph_json(R"({"format_version": 1, "inputs": [{"name": "a", "dtype": "f32", "shape": [16, 32]},
        {"name": "b", "dtype": "f32", "shape": [32, 8]}], "outputs": ["y"],
        "nodes": [{"op": "MatMul", "name": "mm", "inputs": ["a", "b"], "outputs": ["y"]}]})");
    form_clusters(g);
    REQUIRE(g.clusters.size() == 1);
    double bytes = 4.0 * (16 * 32 + 32 * 8 + 16 * 8);
    CHECK(static_cluster_cost(g, g.clusters[0]) == Approx(2.0 * 16 * 32 * 8 + kShardBytesWeight * bytes));
}

TEST_CASE("shard: the split is deterministic, disjoint, complete and balanced", "[tuner][fleet]") {
    std::vector<ShardItem> items;
    for (int i = 0; i < 23; i++) items.push_back({"sig" + std::to_string((i * 7) % 23), 1.0 + (double)((i * 37) % 11)});
    for (int n : {1, 2, 3, 5, 30}) {
        INFO(n);
        std::vector<int> a = assign_shards(items, n);
        // the same split from the items in another order: it depends on signatures and costs only
        std::vector<ShardItem> reversed(items.rbegin(), items.rend());
        std::vector<int> b = assign_shards(reversed, n);
        std::map<std::string, int> by_sig;
        for (size_t i = 0; i < items.size(); i++) by_sig[items[i].signature] = a[i];
        for (size_t i = 0; i < reversed.size(); i++) CHECK(by_sig[reversed[i].signature] == b[i]);
        std::vector<double> load(n, 0.0);
        for (size_t i = 0; i < items.size(); i++) {
            REQUIRE(a[i] >= 0);
            REQUIRE(a[i] < n);
            load[a[i]] += items[i].cost;
        }
        double largest = 0;
        for (const ShardItem &it : items) largest = std::max(largest, it.cost);
        auto [lo, hi] = std::minmax_element(load.begin(), load.end());
        if ((int)items.size() >= n) CHECK(*hi - *lo <= largest);
        CHECK(std::accumulate(load.begin(), load.end(), 0.0) == Approx(std::accumulate(items.begin(), items.end(), 0.0,
                                                                                        [](double s, const ShardItem &it) { return s + it.cost; })));
    }
}

TEST_CASE("shard: the shards of a config model cover its distinct clusters once", "[tuner][fleet]") {
    Graph g = load_graph_json(std::string(FUSOR_SOURCE_DIR) + "/configs/models/transformer_mlp.json");
    form_clusters(g);
    std::map<std::string, double> cost;
    for (const Cluster &c : g.clusters) cost[cluster_signature(g, c)] += static_cluster_cost(g, c);
    std::vector<ShardItem> items;
    for (const auto &[sig, c] : cost) items.push_back({sig, c});
    REQUIRE(items.size() >= 2);
    std::vector<int> a = assign_shards(items, 2);
    std::set<int> used(a.begin(), a.end());
    CHECK(used == std::set<int>{0, 1});
}

TEST_CASE("db location: postgresql URLs pick PostgreSQL, other schemes are refused, files stay files", "[tuner][fleet]") {
    CHECK(is_database_url("postgresql://tuner@db.example.com:5432/fusor"));
    CHECK(is_database_url("postgres:///fusor?host=/run/postgresql"));
    CHECK(is_database_url("postgresql://"));
    CHECK_FALSE(is_database_url("tuning.db"));
    CHECK_FALSE(is_database_url("/tmp/postgresql.db"));
    CHECK_FALSE(is_database_url(":memory:"));
    try {
        is_database_url("mysql://root:hunter2@localhost/fusor");
        FAIL("accepted");
    } catch (const UserError &e) {
        std::string msg = e.what();
        CHECK_THAT(msg, Catch::Contains("unknown URL scheme 'mysql'"));
        CHECK_THAT(msg, !Catch::Contains("hunter2"));
    }
    CHECK(same_database("postgresql://a@h/x", "postgresql://a@h/x"));
    CHECK_FALSE(same_database("postgresql://a@h/x", "x"));
    CHECK(database_exists("postgresql://a@h/x"));
    CHECK_FALSE(database_exists("/nonexistent/dir/t.db"));
}

TEST_CASE("db location: passwords never appear in the name messages show", "[tuner][fleet]") {
    CHECK(redact_location("postgresql://tuner:s3cret@db:5432/fusor") == "postgresql://tuner@db:5432/fusor");
    CHECK(redact_location("postgresql://tuner:s3cret@/fusor?host=/tmp/x&port=5") == "postgresql://tuner@/fusor?host=/tmp/x&port=5");
    CHECK(redact_location("postgresql://tuner@db/fusor?password=s3cret&sslmode=require") == "postgresql://tuner@db/fusor?sslmode=require");
    CHECK(redact_location("postgresql://tuner@db/fusor?sslmode=require&password=s3cret") == "postgresql://tuner@db/fusor?sslmode=require");
    CHECK(redact_location("postgresql://db/fusor") == "postgresql://db/fusor");
    CHECK(redact_location("local/tuning.db") == "local/tuning.db");
    // a port is no password, and an '@' after the authority is no user info
    CHECK(redact_location("postgresql://db:5432/fusor?application_name=a@b") == "postgresql://db:5432/fusor?application_name=a@b");
    CHECK(redact_location("postgresql://u:p1@db/f?password=p2&sslmode=require&password=p3") == "postgresql://u@db/f?sslmode=require");
}
