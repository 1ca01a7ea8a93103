// The timing rule of side-by-side reports (runtime/Benchmark.h): blocks, order, rounds, spread.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "runtime/Benchmark.h"

using namespace fusor;

TEST_CASE("time_blocks: each function runs in blocks of about block_ms, in an order that reverses every round", "[runtime][timing]") {
    std::vector<int> calls(2, 0);
    std::vector<int> order;  // the function of each call after the warm-up
    bool warm = false;
    auto sleeper = [&](int i, int us) {
        return [&, i, us] {
            calls[i]++;
            if (warm) order.push_back(i);
            std::this_thread::sleep_for(std::chrono::microseconds(us));
        };
    };
    int rounds = 0;
    auto more = [&](const std::vector<std::vector<double>> &s) {
        warm = true;
        rounds = (int)s[0].size();
        return rounds < 4;
    };
    // 20 ms blocks: a loaded machine's sleeps overshoot by milliseconds, and a block must still
    // hold several short calls
    std::vector<Timing> t = time_blocks({sleeper(0, 500), sleeper(1, 2500)}, 1, more, 20.0);
    REQUIRE(t.size() == 2);
    CHECK(t[0].samples_ms.size() == 4);
    CHECK(t[1].samples_ms.size() == 4);
    // a 0.5 ms call runs at most 40 times a block, a 2.5 ms call at most 8 times (sleep only overshoots)
    CHECK(calls[0] - 1 <= 4 * 40);
    CHECK(calls[1] - 1 <= 4 * 8);
    CHECK(calls[0] - 1 > 4 * 1);  // more than one call per block
    // per call, not per block (both would be about block_ms): the medians differ by about the 2 ms
    // between the sleeps; a loaded machine adds about as much to every call of both, so the
    // difference holds where a ratio would not
    CHECK(t[1].median_ms - t[0].median_ms > 1.0);
    // round 0 starts with function 0, round 1 with function 1
    REQUIRE_FALSE(order.empty());
    CHECK(order.front() == 0);
    size_t first_round = (size_t)(calls[0] - 1) / 4 + (size_t)(calls[1] - 1) / 4;
    REQUIRE(order.size() > first_round);
    CHECK(order[first_round] == 1);
}

TEST_CASE("time_interleaved: one call per block by default, for per-kernel profiles", "[runtime][timing]") {
    int calls = 0;
    std::vector<Timing> t = time_interleaved({[&] { calls++; }}, 2, 7);
    CHECK(calls == 2 + 7);
    CHECK(t[0].samples_ms.size() == 7);
}

TEST_CASE("spread_of: (p90 - min) / median, 0 for fewer than two samples", "[runtime][timing]") {
    CHECK(spread_of({}) == 0);
    CHECK(spread_of({3}) == 0);
    // 10 samples 1..10: median 5.5, p90 by nearest rank is the 9th, 9
    CHECK(spread_of({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}) == Approx((9.0 - 1.0) / 5.5));
}
