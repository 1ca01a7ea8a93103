// Schedules as data: the text form round-trips, and bad text is rejected with the line and token.
#include <catch2/catch.hpp>

#include "generators/Schedule.h"

using namespace fusor;

TEST_CASE("schedule text: round-trips every field", "[generators][schedule_text]") {
    ClusterSchedule s;
    StageSchedule acc;
    acc.stage = "c0_conv1_acc";
    acc.level = ComputeLevel::At;
    acc.at_stage = "c0_relu1";
    acc.at_var = "xo";
    acc.vector_width = 8;
    acc.unroll = {0, 1};
    StageSchedule out;
    out.stage = "c0_relu1";
    out.level = ComputeLevel::Root;
    out.tile = {16, 8};
    out.vector_width = 8;
    out.parallel = true;
    out.order = {"xo", "yo"};
    out.note = "cluster output";
    StageSchedule bn;
    bn.stage = "c0_bn1";
    s.stages = {acc, out, bn};
    std::string text = to_text(s);
    CHECK(text ==
          "c0_conv1_acc at=c0_relu1.xo vec=8 unroll=0,1\n"
          "c0_relu1 root tile=16x8 order=xo,yo vec=8 parallel  # cluster output\n"
          "c0_bn1 inline\n");
    std::string error;
    auto parsed = parse_schedule(text, &error);
    INFO(error);
    REQUIRE(parsed);
    CHECK(*parsed == s);
    CHECK(parsed->stages[1].note == "cluster output");
    CHECK(to_text(*parsed) == text);
}

TEST_CASE("schedule text: rejects malformed lines, naming line and token", "[generators][schedule_text]") {
    std::string error;
    CHECK_FALSE(parse_schedule("a root\nb root vec=abc\n", &error));
    CHECK(error == "line 2: 'vec=abc': expected an integer lane count");
    CHECK_FALSE(parse_schedule("a root tile=0x8", &error));
    CHECK(error.find("tile extents must be positive") != std::string::npos);
    CHECK_FALSE(parse_schedule("a at=b", &error));
    CHECK(error.find("expected at=<stage>.<loop>") != std::string::npos);
    CHECK_FALSE(parse_schedule("a root inline", &error));
    CHECK(error.find("given twice") != std::string::npos);
    // every directive once: a second would silently override the first
    for (const char *twice : {"a root vec=16 vec=3", "a root tile=8x8 tile=4x4", "a root parallel parallel", "a root prepack prepack=8",
                              "a at=b.x at=b.y", "a root unroll=0 unroll=1"}) {
        INFO(twice);
        CHECK_FALSE(parse_schedule(twice, &error));
        CHECK(error.find("given twice") != std::string::npos);
    }
    CHECK_FALSE(parse_schedule("a vec=8", &error));
    CHECK(error.find("no compute level") != std::string::npos);
    CHECK_FALSE(parse_schedule("a root\na inline", &error));
    CHECK(error.find("scheduled twice") != std::string::npos);
    CHECK_FALSE(parse_schedule("a root fast", &error));
    CHECK(error.find("unknown token 'fast'") != std::string::npos);
}

TEST_CASE("schedule text: blank and comment lines are ignored", "[generators][schedule_text]") {
    std::string error;
    auto s = parse_schedule("\n# a comment\nx root\n\n", &error);
    REQUIRE(s);
    REQUIRE(s->stages.size() == 1);
    CHECK(s->stages[0].stage == "x");
}
