// Runs an ONNX image classifier and prints its top-5 classes, with the time of the first call
// (which compiles the kernels) and of a warm one.
//
//     onnx_classify                 the small model the repository ships (examples/data/
//                                   tiny_cnn.onnx: ten synthetic patterns, five shapes in red or
//                                   blue, trained by scripts/onnx_models.py) on a drawn blue
//                                   checkerboard
//     onnx_classify model.onnx      your model, on a deterministic test image of the shape its
//                                   first input declares (a dynamic axis gets 1)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

#include "tempura/onnx.hpp"
#include "tempura/tempura.hpp"

#ifndef TEMPURA_EXAMPLE_DATA
#define TEMPURA_EXAMPLE_DATA "examples/data"
#endif

using tempura::Shape;
using tempura::Tensor;

namespace {

const char* kPatterns[] = {"horizontal stripes", "vertical stripes", "checkerboard",
                           "diagonal stripes", "square"};
const char* kColors[] = {"red", "blue"};

// Class c of the shipped model: pattern c % 5 in color c / 5 (red: channel 0, blue: channel 2).
std::vector<float> draw(int c) {
    std::vector<float> img(3 * 32 * 32, 0.0f);
    const int channel = (c / 5) * 2;
    for (int r = 0; r < 32; ++r)
        for (int k = 0; k < 32; ++k) {
            const int v[] = {(r / 4) % 2, (k / 4) % 2, (r / 4 + k / 4) % 2, ((r + k) / 4) % 2,
                             std::abs(r - 16) < 8 && std::abs(k - 16) < 8};
            img[static_cast<size_t>((channel * 32 + r) * 32 + k)] = static_cast<float>(v[c % 5]);
        }
    return img;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

int main(int argc, char** argv) {
    const bool shipped = argc < 2;
    const std::string path =
        shipped ? std::string(TEMPURA_EXAMPLE_DATA) + "/tiny_cnn.onnx" : argv[1];
    try {
        if (!tempura::onnx::available()) {
            std::printf("This build has no ONNX support (configure with libonnx-dev installed).\n");
            return 0;
        }
        const auto model = tempura::onnx::Model::load(path);
        const std::string input = model.input_names().at(0), output = model.output_names().at(0);
        // The input: the drawn checkerboard, or a smooth deterministic image of the declared shape.
        Shape shape;
        for (int64_t d : model.input_shape(input)) shape.push_back(d < 0 ? 1 : d);
        std::vector<float> data;
        if (shipped) {
            data = draw(7);
        } else {
            const int64_t n =
                std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
            data.resize(static_cast<size_t>(n));
            for (int64_t k = 0; k < n; ++k)
                data[static_cast<size_t>(k)] =
                    static_cast<float>(std::sin(0.01 * static_cast<double>(k)));
        }
        const Tensor x = Tensor::from_vector(data, shape);
        std::printf("%s: input '%s' %s, output '%s', opset %lld\n", path.c_str(), input.c_str(),
                    tempura::shape_str(shape).c_str(), output.c_str(),
                    static_cast<long long>(model.opset()));

        // run() is lazy: softmax and top-5 fuse with the model's last kernels.
        auto classify = [&] {
            Tensor logits = model.run({{input, x}}).at(output);
            Tensor probs = logits.reshape({logits.shape()[0], -1}).softmax(1);
            const int64_t k = std::min<int64_t>(5, probs.shape()[1]);
            auto [values, indices] = probs.topk(k, 1);
            tempura::realize({values, indices});
            return std::make_pair(values.to_vector<float>(), indices.to_vector<int>());
        };
        auto t0 = std::chrono::steady_clock::now();
        const auto first = classify();
        const double first_ms = ms_since(t0);
        t0 = std::chrono::steady_clock::now();
        const auto [probs, classes] = classify();
        const double warm_ms = ms_since(t0);

        std::printf("top-%zu classes:\n", classes.size());
        for (size_t i = 0; i < classes.size(); ++i) {
            const int c = classes[i];
            std::string name = "class " + std::to_string(c);
            if (shipped) name += " (" + std::string(kPatterns[c % 5]) + ", " + kColors[c / 5] + ")";
            std::printf("  %zu. %-38s %6.2f%%\n", i + 1, name.c_str(), 100.0 * probs[i]);
        }
        std::printf("first call (compiles): %.1f ms, warm call: %.1f ms\n", first_ms, warm_ms);
        if (first.second != classes) {
            std::printf("the warm call disagrees with the first one\n");
            return 1;
        }
        if (shipped && classes.at(0) != 7) {
            std::printf("expected class 7 (checkerboard, blue) first\n");
            return 1;
        }
    } catch (const tempura::Error& e) {
        std::printf("%s\n", e.what());
        return 1;
    }
    return 0;
}
