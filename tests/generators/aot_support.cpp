// The support code every `fusor compile` library includes (runtime/aot/fusor_aot_support.h), tested
// directly: the strided copy that fills graph outputs no kernel writes.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#define FUSOR_AOT_NS fusor_aot_test
#include "runtime/aot/fusor_aot_support.h"

namespace {

halide_buffer_t make(void *host, halide_type_code_t code, int bits,
                     std::vector<halide_dimension_t> &dims) {
    halide_buffer_t b{};
    b.host = (uint8_t *)host;
    b.type.code = code;
    b.type.bits = (uint8_t)bits;
    b.type.lanes = 1;
    b.dimensions = (int)dims.size();
    b.dim = dims.data();
    return b;
}

}  // namespace

TEST_CASE("AOT support: copy_strided copies any layout into any layout", "[generators][aot]") {
    // a 2x3x4 tensor (ONNX order), dense source; destinations: dense, transposed and padded
    std::vector<float> src(24);
    for (size_t i = 0; i < src.size(); i++) src[i] = 0.5f * (float)i - 3;
    std::vector<halide_dimension_t> sd = {{0, 4, 1, 0}, {0, 3, 4, 0}, {0, 2, 12, 0}};
    halide_buffer_t s = make(src.data(), halide_type_float, 32, sd);
    struct Layout {
        int32_t strides[3];  // Halide order: innermost first
        size_t size;
    };
    for (Layout l : {Layout{{1, 4, 12}, 24}, Layout{{6, 2, 1}, 24}, Layout{{2, 9, 30}, 60}}) {
        INFO("strides " << l.strides[0] << " " << l.strides[1] << " " << l.strides[2]);
        std::vector<float> dst(l.size, -99.0f);
        std::vector<halide_dimension_t> dd = {
            {0, 4, l.strides[0], 0}, {0, 3, l.strides[1], 0}, {0, 2, l.strides[2], 0}};
        halide_buffer_t b = make(dst.data(), halide_type_float, 32, dd);
        fusor_aot_test::copy_strided(&s, &b);
        size_t written = 0;
        for (int n = 0; n < 2; n++) {
            for (int c = 0; c < 3; c++) {
                for (int w = 0; w < 4; w++) {
                    CHECK(dst[(size_t)(w * l.strides[0] + c * l.strides[1] + n * l.strides[2])] ==
                          src[(size_t)(n * 12 + c * 4 + w)]);
                    written++;
                }
            }
        }
        size_t untouched = 0;
        for (float v : dst) untouched += v == -99.0f;
        CHECK(untouched == l.size - written);  // padding left alone
    }
    // strided source too, and a scalar bool
    std::vector<halide_dimension_t> td = {{0, 4, 6, 0}, {0, 3, 2, 0}, {0, 2, 1, 0}};
    std::vector<float> transposed(24), back(24);
    halide_buffer_t t = make(transposed.data(), halide_type_float, 32, td);
    fusor_aot_test::copy_strided(&s, &t);
    halide_buffer_t d = make(back.data(), halide_type_float, 32, sd);
    fusor_aot_test::copy_strided(&t, &d);
    CHECK(back == src);
    uint8_t yes = 1, out = 0;
    std::vector<halide_dimension_t> none;
    halide_buffer_t bs = make(&yes, halide_type_uint, 1, none),
                    bd = make(&out, halide_type_uint, 1, none);
    fusor_aot_test::copy_strided(&bs, &bd);
    CHECK(out == 1);
}
