// The GPU path without a GPU: devices, gpu dims, PTX checked by ptxas, and EMU, the emulated GPU
// that runs the GPU program on the CPU and checks every access.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <doctest/doctest.h>

#include "../error_at.hpp"
#include "../support.hpp"
#include "default_device.hpp"
#include "ptxas.hpp"
#include "tempura/backend/cuda.hpp"
#include "tempura/backend/gpu.hpp"
#include "tempura/codegen/opts.hpp"
#include "tempura/codegen/stages.hpp"
#include "tempura/schedule/schedule.hpp"
#include "tempura/tempura.hpp"

using namespace tempura;

namespace {

// Every kernel of `t` is an EMU kernel whose PTX targets sm_80 and assembles for sm_80 and sm_90.
void check_kernels(Tensor t) {
    t.realize(); // (a cached plan: the kernels that computed it)
    REQUIRE(!t.kernels().empty());
    for (const KernelInfo& k : t.kernels()) {
        INFO(k.name);
        CHECK(k.backend == "EMU");
        CHECK(k.source.find(".target sm_80") != std::string::npos);
        CHECK(k.source.find(".entry " + k.name) != std::string::npos);
        CHECK(ptxas(k.source, "sm_80") == "");
        CHECK(ptxas(k.source, "sm_90") == "");
    }
}

std::vector<float> values(size_t n, uint32_t seed) {
    std::vector<float> v(n);
    uint32_t s = seed;
    for (float& x : v) {
        s = s * 1664525u + 1013904223u;
        x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 250.0f;
    }
    return v;
}

} // namespace

TEST_CASE("devices: CPU and EMU, and the errors for others") {
    // CUDA devices follow where the driver reports usable ones (tests/gpu/test_cuda.cpp).
    const std::vector<std::string> all = devices();
    REQUIRE(all.size() >= 2);
    CHECK(std::vector<std::string>(all.begin(), all.begin() + 2) ==
          std::vector<std::string>{"CPU", "EMU"});
    // Then the usable GPUs in ordinal order ("CUDA:1" alone where CUDA:0 is of an arch Tempura
    // does not run on).
    std::string listing;
    int64_t last_ordinal = -1;
    for (size_t i = 0; i < all.size(); ++i) {
        listing += (i ? ", " : "") + all[i];
        if (i < 2) continue;
        REQUIRE(all[i].rfind("CUDA:", 0) == 0);
        const int64_t ordinal = std::stoll(all[i].substr(5));
        CHECK(ordinal > last_ordinal);
        last_ordinal = ordinal;
    }
    if (!cuda::cuda_usable()) CHECK(all.size() == 2);
    CHECK(error_of([] { set_default_device("TPU"); }) ==
          "[device] unknown device 'TPU' (devices: " + listing + ")");
    if (!cuda::cuda_usable()) {
        CHECK(error_of([] { set_default_device("CUDA"); }) ==
              "[device] CUDA: no usable CUDA device here (devices: CPU, EMU)");
        CHECK(error_of([] { Tensor::ones({2}).to("CUDA:1"); }) ==
              at_line(__LINE__ - 1,
                      "[device] CUDA:1: no usable CUDA device here (devices: CPU, EMU)"));
    }
    const DefaultDevice emu("EMU");
    CHECK(default_device() == "EMU");
    const Tensor a = Tensor::from_vector(std::vector<float>{1, 2, 3});
    CHECK(a.device() == "EMU");
    CHECK(Tensor::zeros({2}).device() == "EMU");
}

TEST_CASE("devices: tensors on different devices do not mix; to() copies") {
    const Tensor c = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
    CHECK(c.device() == "CPU");
    const Tensor e = c.to("EMU");
    CHECK(e.device() == "EMU");
    CHECK(c.to("CPU").buffer() == c.buffer()); // already there: the same tensor
    CHECK(e.buffer() != c.buffer());
    CHECK(error_of([&] { (void)(c + e); }) ==
          at_line(__LINE__ - 1, "[add] tensors on different devices: CPU and EMU"));
    CHECK(error_of([&] { (void)(e * c); }) ==
          at_line(__LINE__ - 1, "[mul] tensors on different devices: EMU and CPU"));
    CHECK(error_of([&] { (void)where(c > 2.0f, e, e); }) ==
          at_line(__LINE__ - 1, "[where] tensors on different devices: CPU and EMU"));
    CHECK(error_of([&] {
              Tensor x = c * 2.0f, y = e * 2.0f;
              realize({x, y});
          }) == "[realize] tensors on different devices: CPU and EMU");
    // A constant goes with either device.
    Tensor k = e + 1.0f;
    k.realize();
    CHECK(k.device() == "EMU");
    CHECK(k.to_vector<float>() == std::vector<float>{2, 3, 4, 5});
    CHECK(k.kernels().at(0).backend == "EMU");
    Tensor on_cpu = c + 1.0f;
    on_cpu.realize();
    CHECK(on_cpu.kernels().at(0).backend == "CPU");
    const Tensor back = k.to("CPU");
    CHECK(back.device() == "CPU");
    CHECK((back + c).to_vector<float>() == std::vector<float>{3, 5, 7, 9});
}

TEST_CASE("devices: to() pins a constant to its device; a bare constant goes with either") {
    // ones() reads no buffer; after to(d) it lives on d all the same, and so does what is
    // computed from it.
    const Tensor c = Tensor::ones({4}).to("CPU");
    const Tensor e = Tensor::ones({4}).to("EMU");
    CHECK(c.device() == "CPU");
    CHECK(e.device() == "EMU");
    CHECK(error_of([&] { (void)(c + e); }) ==
          at_line(__LINE__ - 1, "[add] tensors on different devices: CPU and EMU"));
    CHECK(error_of([&] { (void)((c * 2.0f) - (e + 1.0f)); }) ==
          at_line(__LINE__ - 1, "[sub] tensors on different devices: CPU and EMU"));
    CHECK(error_of([&] { (void)where(c > 0.0f, c, e); }) ==
          at_line(__LINE__ - 1, "[where] tensors on different devices: CPU and EMU"));
    const Tensor from_buffer = Tensor::from_vector(std::vector<float>{1, 2, 3, 4});
    CHECK(error_of([&] { (void)(e + from_buffer); }) ==
          at_line(__LINE__ - 1, "[add] tensors on different devices: EMU and CPU"));
    CHECK(e.gather(0, Tensor::zeros({2}, DType::Int32).to("EMU")).to_vector<float>() ==
          std::vector<float>{1, 1});
    CHECK(error_of([&] { (void)c.gather(0, Tensor::zeros({2}, DType::Int32).to("EMU")); }) ==
          at_line(__LINE__ - 1, "[gather] tensors on different devices: CPU and EMU"));
    // A bare constant still goes with either device; the pinned one keeps its own.
    Tensor k = e + 1.0f;
    CHECK(k.device() == "EMU");
    k.realize();
    CHECK(k.kernels().at(0).backend == "EMU");
    CHECK(k.to_vector<float>() == std::vector<float>{2, 2, 2, 2});
    Tensor both = (Tensor::ones({4}) * 3.0f) + e; // unpinned ones() on the default device
    CHECK(both.device() == "EMU");
    both.realize();
    CHECK(both.kernels().at(0).backend == "EMU");
    CHECK(both.to_vector<float>() == std::vector<float>{4, 4, 4, 4});
}

TEST_CASE("GPU kernels round once per op: the PTX fuses only MULACC") {
    // On an H100, NVPTX fused t + s * (-1/3) into one FMA when every instruction carried
    // `contract`, and t - t.mean() of whole numbers was off in the last bit on the GPU alone
    // (EMU runs the host's code, which did not fuse). Now a multiply and a subtract stay two
    // roundings in the PTX (with `contract` each of these was one fma.rn); a * b + c (MULACC) is
    // the one FMA.
    const Tensor t = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK((t.to("EMU") - t.to("EMU").mean(1, true)).to_vector<float>() ==
          std::vector<float>{-1, 0, 1, -1, 0, 1});
    const Tensor ac = Tensor::from_vector(std::vector<float>{0.1f, 0.2f, 0.3f});
    const Tensor bc = ac + 1.0f, cc = ac * 3.0f;
    const Tensor a = ac.to("EMU"), b = bc.to("EMU"), c = cc.to("EMU");
    // The CPU rounds each op too: the same values.
    const std::vector<std::pair<Tensor, Tensor>> pairs{{c - a * b, cc - ac * bc},
                                                       {a * b - c, ac * bc - cc}};
    for (auto [r, on_cpu] : pairs) {
        r.realize();
        CHECK(r.kernels().at(0).source.find("fma.rn") == std::string::npos);
        CHECK(r.to_vector<float>() == on_cpu.to_vector<float>());
    }
    Tensor m = a * b + c;
    m.realize();
    CHECK(m.kernels().at(0).source.find("fma.rn.f32") != std::string::npos);
}

TEST_CASE("EMU: kernels agree with the CPU's, and their PTX assembles") {
#ifndef TEMPURA_PTXAS
    MESSAGE("SKIPPED: ptxas checks (CMake found no CUDA toolkit); the values are still checked");
#endif
    const Tensor x = Tensor::from_vector(values(64 * 96, 1), {64, 96});
    const Tensor w = Tensor::from_vector(values(96 * 40, 2), {96, 40});
    const Tensor xe = x.to("EMU"), we = w.to("EMU");

    SUBCASE("elementwise with broadcasting") {
        const Tensor b = Tensor::from_vector(values(96, 3), {96});
        auto f = [](const Tensor& p, const Tensor& q) { return (p * 2.0f + q).exp().sqrt(); };
        Tensor r = f(xe, b.to("EMU"));
        r.realize();
        check_close(r.to_vector<float>(), f(x, b).to_vector<float>(), 1e-6f);
        check_kernels(r);
        // Inputs are readonly (non-coherent loads), sqrt is IEEE (sqrt.rn), exp is the
        // decomposition (no libdevice call), and the block is the LOCAL blocking (96 -> 32).
        const std::string& ptx = r.kernels().at(0).source;
        CHECK(ptx.find("ld.global.nc.f32") != std::string::npos);
        CHECK(ptx.find("sqrt.rn.f32") != std::string::npos);
        CHECK(ptx.find("call") == std::string::npos);
        CHECK(ptx.find(".maxntid 32, 1, 1") != std::string::npos);
    }
    SUBCASE("reductions over each axis") {
        for (int64_t axis : {0, 1}) {
            const Tensor s = xe.sum(axis), m = xe.max(axis);
            check_close(s.to_vector<float>(), x.sum(axis).to_vector<float>(), 1e-5f);
            CHECK(m.to_vector<float>() == x.max(axis).to_vector<float>());
            check_kernels(s);
        }
        CHECK(xe.argmax(1).to_vector<int32_t>() == x.argmax(1).to_vector<int32_t>());
    }
    SUBCASE("matmul and softmax") {
        const Tensor m = xe.matmul(we).softmax(-1);
        check_close(m.to_vector<float>(), x.matmul(w).softmax(-1).to_vector<float>(), 1e-5f);
        check_kernels(m);
    }
    SUBCASE("conv2d with padding and stride, and max_pool2d") {
        const Tensor img = Tensor::from_vector(values(2 * 3 * 9 * 9, 4), {2, 3, 9, 9});
        const Tensor k = Tensor::from_vector(values(4 * 3 * 3 * 3, 5), {4, 3, 3, 3});
        nn::ConvOptions o;
        o.stride = {2};
        o.padding = {1};
        const Tensor c = nn::conv2d(img.to("EMU"), k.to("EMU"), o);
        check_close(c.to_vector<float>(), nn::conv2d(img, k, o).to_vector<float>(), 1e-5f);
        check_kernels(c);
        nn::PoolOptions p;
        p.kernel = {2};
        const Tensor mp = nn::max_pool2d(img.to("EMU"), p);
        CHECK(mp.to_vector<float>() == nn::max_pool2d(img, p).to_vector<float>());
    }
    SUBCASE("gather, scatter_add, cumsum and sort") {
        const Tensor idx = Tensor::from_vector(std::vector<int32_t>{3, 0, 95, 7, 7, 1}, {1, 6})
                               .expand({64, 6})
                               .contiguous();
        const Tensor g = xe.gather(1, idx.to("EMU"));
        CHECK(g.to_vector<float>() == x.gather(1, idx).to_vector<float>());
        const Tensor src = Tensor::ones({64, 6});
        const Tensor sa = xe.scatter_add(1, idx.to("EMU"), src.to("EMU"));
        CHECK(sa.to_vector<float>() == x.scatter_add(1, idx, src).to_vector<float>());
        check_close(xe.cumsum(1).to_vector<float>(), x.cumsum(1).to_vector<float>(), 1e-5f);
        CHECK(xe.sort(1).to_vector<float>() == x.sort(1).to_vector<float>());
        check_kernels(xe.sort(1));
    }
    SUBCASE("random numbers are the same for a seed on every device") {
        manual_seed(11);
        const std::vector<float> cpu = Tensor::rand({1000}).to_vector<float>();
        manual_seed(11);
        const DefaultDevice emu("EMU");
        const Tensor r = Tensor::rand({1000});
        CHECK(r.device() == "EMU");
        CHECK(r.to_vector<float>() == cpu);
    }
}

TEST_CASE("EMU: an access outside a buffer names the kernel, block, thread and element") {
    // Hand-written GPU program: out[block * 4 + thread] = 1 over a grid of 4 x 4, into a buffer
    // of 8 elements: blocks 2 and 3 write past its end.
    const UOp four = UOp::index(4);
    const UOp out = UOp::make(Op::Param, DType::Float32.ptr(), {}, std::vector<int64_t>{0, 8});
    const UOp b = UOp::make(Op::Special, DType::Index, {four}, std::vector<int64_t>{0, 0});
    const UOp t = UOp::make(Op::Special, DType::Index, {four}, std::vector<int64_t>{1, 0});
    const UOp mul = b * four;
    const UOp off = mul + t;
    const UOp idx = UOp::make(Op::Index, DType::Float32.ptr(), {out, off});
    const UOp one = UOp::constant_f(DType::Float32, 1.0);
    const UOp st = UOp::make(Op::Store, DType::Void, {idx, one});
    const std::vector<UOp> program{four, out, b, t, mul, off, idx, one, st};
    const auto k = runtime::compile_emu_kernel("E_oob", program, 4);
    CHECK(k->source().find("st.global.") != std::string::npos);
    CHECK(ptxas(k->source(), "sm_80") == "");
    std::vector<float> mem(8, 0.0f);
    void* bufs[1] = {mem.data()};
    CHECK(error_of([&] {
              runtime::emu_launch(*k, bufs, nullptr, {4, 1, 1}, {4, 1, 1});
          }) ==
          "[emu] kernel E_oob: block (2, 0, 0), thread (3, 0, 0): STORE at element 11 of buffer 0 "
          "(8 elements)");                     // (a block's threads run last first)
    CHECK(mem == std::vector<float>(8, 1.0f)); // the accesses inside the buffer happened
    runtime::emu_launch(*k, bufs, nullptr, {2, 1, 1}, {4, 1, 1});
    CHECK(error_of([&] {
              runtime::emu_launch(*k, bufs, nullptr, {1, 1, 1}, {2048, 1, 1});
          }) ==
          "[emu] kernel E_oob: block (2048, 1, 1) is outside the device's limits (1024, 1024, "
          "64)");
    CHECK(error_of([&] {
              runtime::emu_launch(*k, bufs, nullptr, {1, 1, 1}, {64, 32, 1});
          }) == "[emu] kernel E_oob: 2048 threads per block exceed the limit of 1024");
}

// gpu dims lays every output range out over blocks and threads. For each layout (ranges that
// fit a dim each, more ranges than dims, ranges bigger than a dim, LOCAL ranges), enumerating
// every block and thread must reach every output element exactly once.
TEST_CASE("gpu dims: the block and thread indices cover the output exactly once") {
    struct Case {
        std::vector<int64_t> global, local;
    };
    const std::vector<Case> cases = {
        {{5}, {}},           {{3, 4}, {}},  {{2, 3, 4}, {}}, {{2, 2, 3, 2}, {}},
        {{70}, {}},          {{4, 70}, {}}, {{3}, {4}},      {{2, 3}, {2, 4}},
        {{2}, {2, 2, 2, 2}}, {{5, 5}, {9}}, {{1, 6}, {3}},
    };
    codegen::DeviceLimits lim = codegen::gpu_limits("small", 80);
    lim.max_grid = {64, 8, 4}; // small limits force merging and splitting
    lim.max_block = {8, 4, 2};
    lim.max_threads_per_block = 16;
    for (const Case& c : cases) {
        std::vector<UOp> ranges;
        int64_t id = 0;
        for (int64_t s : c.global)
            ranges.push_back(UOp::make(Op::Range, DType::Index, {UOp::index(s)},
                                       RangeArg{id++, AxisType::Loop}));
        for (int64_t s : c.local)
            ranges.push_back(UOp::make(Op::Range, DType::Index, {UOp::index(s)},
                                       RangeArg{id++, AxisType::Local}));
        UOp offset = UOp::index(0);
        int64_t n = 1;
        for (const UOp& r : ranges) {
            offset = offset * UOp::index(r.src(0).const_value()) + r;
            n *= r.src(0).const_value();
        }
        const UOp out = UOp::make(Op::Param, DType::Int32.ptr(), {}, std::vector<int64_t>{0, n});
        std::vector<UOp> end{UOp::make(Op::Store, DType::Void,
                                       {UOp::make(Op::Index, DType::Int32.ptr(), {out, offset}),
                                        UOp::constant(DType::Int32, 1)})};
        end.insert(end.end(), ranges.begin(), ranges.end());
        const UOp ast = UOp::sink({UOp::make(Op::End, DType::Void, end)});
        std::array<int64_t, 3> grid{}, block{};
        const UOp g = codegen::gpu_dims(ast, lim, "K", grid, block);
        INFO("global " << c.global.size() << " local " << c.local.size() << " n " << n);
        for (size_t d = 0; d < 3; ++d) {
            CHECK(grid[d] <= lim.max_grid[d]);
            CHECK(block[d] <= lim.max_block[d]);
        }
        CHECK(grid[0] * grid[1] * grid[2] * block[0] * block[1] * block[2] == n);
        std::vector<UOp> specials;
        UOp store;
        for (const UOp& u : g.toposort()) {
            if (u.op() == Op::Special) specials.push_back(u);
            if (u.op() == Op::Range) FAIL("a range is left");
            if (u.op() == Op::Store) store = u;
        }
        REQUIRE(!store.is_null());
        std::map<int64_t, int> hits;
        for (int64_t bz = 0; bz < grid[2]; ++bz)
            for (int64_t by = 0; by < grid[1]; ++by)
                for (int64_t bx = 0; bx < grid[0]; ++bx)
                    for (int64_t tz = 0; tz < block[2]; ++tz)
                        for (int64_t ty = 0; ty < block[1]; ++ty)
                            for (int64_t tx = 0; tx < block[0]; ++tx) {
                                const int64_t ids[2][3] = {{bx, by, bz}, {tx, ty, tz}};
                                std::unordered_map<const UOpNode*, UOp> at;
                                for (const UOp& s : specials) {
                                    const auto& a = s.arg_as<std::vector<int64_t>>();
                                    at.emplace(s.get(), UOp::index(ids[a[0]][a[1]]));
                                }
                                const UOp o = simplify(store.src(0).src(1).substitute(at));
                                REQUIRE(o.is_const());
                                ++hits[o.const_value()];
                            }
        CHECK(static_cast<int64_t>(hits.size()) == n);
        for (const auto& [o, h] : hits) {
            CHECK(o >= 0);
            CHECK(o < n);
            CHECK(h == 1);
        }
    }
}

TEST_CASE("EMU: a scatter's ordered loop runs as one thread") {
    // Two updates of one element in one kernel: the read-add-write must not be spread over
    // threads.
    const Tensor base = Tensor::zeros({4}).to("EMU");
    const Tensor idx = Tensor::from_vector(std::vector<int32_t>{1, 1, 1, 2}).to("EMU");
    const Tensor src = Tensor::from_vector(std::vector<float>{1, 2, 3, 4}).to("EMU");
    const Tensor r = base.scatter_add(0, idx, src);
    CHECK(r.to_vector<float>() == std::vector<float>{0, 6, 4, 0});
    check_kernels(r);
    Tensor rr = r;
    rr.realize();
    const std::string& ptx = rr.kernels().at(0).source;
    CHECK(ptx.find("%tid") == std::string::npos); // one thread, one block
    CHECK(ptx.find("%ctaid") == std::string::npos);
}

TEST_CASE("EMU: float64 transcendentals run as the CPU's, bit for bit, with no library") {
    // exp, log, erf, pow, sin: decomposed into ALU ops on every device (GPU kernels call no C
    // library), so EMU's PTX gives the CPU's values exactly.
    std::vector<double> v;
    for (int i = 0; i < 512; ++i) v.push_back(-40.0 + 0.173 * i);
    v.insert(v.end(), {0.0, -0.0, 1e-310, std::numeric_limits<double>::infinity(), NAN, 700.0});
    const Tensor d = Tensor::from_vector(v);
    const Tensor de = d.to("EMU");
    const auto both = [&](const std::function<Tensor(const Tensor&)>& f) {
        const Tensor e = f(de);
        check_kernels(e);
        const std::vector<double> got = e.to_vector<double>(), want = f(d).to_vector<double>();
        REQUIRE(got.size() == want.size());
        size_t differ = 0;
        // A NaN's sign and payload are the hardware's choice (x86 and PTX propagate different
        // operands): NaN where the CPU has NaN, every other value bit for bit.
        for (size_t i = 0; i < got.size(); ++i)
            differ += std::isnan(got[i]) || std::isnan(want[i])
                          ? std::isnan(got[i]) != std::isnan(want[i])
                          : std::memcmp(&got[i], &want[i], sizeof(double)) != 0;
        CHECK(differ == 0);
    };
    both([](const Tensor& t) { return t.exp(); });
    both([](const Tensor& t) { return t.abs().log(); });
    both([](const Tensor& t) { return (t * 0.1).erf(); });
    both([](const Tensor& t) { return t.abs().pow(t * 0.05); });
    both([](const Tensor& t) { return t.sin() + t.cos(); });
    Tensor e = de.exp();
    e.realize();
    for (const char* call : {"exp2", "lg2", "call"}) {
        CAPTURE(call);
        CHECK(e.kernels().at(0).source.find(call) == std::string::npos);
    }
}

TEST_CASE("EMU: a reduction to few outputs shares its reduce through shared memory") {
    std::vector<float> v(4 * 4096);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.5f;
    const Tensor x = Tensor::from_vector(v, {4, 4096});
    const Tensor xe = x.to("EMU");
    Tensor s = xe.sum(1);
    s.realize();
    CHECK(s.to_vector<float>() == x.sum(1).to_vector<float>());
    REQUIRE(s.kernels().size() == 1);
    // GROUP(1, 256): 256 threads a row, their partials in shared memory, a barrier.
    const std::string& ptx = s.kernels()[0].source;
    CHECK(ptx.find(".shared .align 16 .b8") != std::string::npos);
    CHECK(ptx.find("bar.sync") != std::string::npos);
    CHECK(ptx.find(".maxntid 256, 1, 1") != std::string::npos);
    CHECK(ptxas(ptx, "sm_80") == "");
    CHECK(ptxas(ptx, "sm_90") == "");
    CHECK(xe.max(1).to_vector<float>() == x.max(1).to_vector<float>());
    // Elements under 4 bytes: neighbouring threads' partials share a shared-memory word (a
    // race only where they share a byte, which EMU's race detector tells apart).
    const Tensor h = x.cast(DType::Float16);
    Tensor he = h.to("EMU").max(1);
    he.realize();
    CHECK(he.to_vector<float>() == h.max(1).to_vector<float>());
    const Tensor bits = x > 2.9f;
    Tensor be = bits.to("EMU").any(1);
    be.realize();
    CHECK(be.to_vector<bool>() == bits.any(1).to_vector<bool>());
    for (const Tensor* t : {&he, &be}) {
        REQUIRE(t->kernels().size() == 1);
        CHECK(t->kernels()[0].source.find("bar.sync") != std::string::npos);
        CHECK(ptxas(t->kernels()[0].source, "sm_80") == "");
        CHECK(ptxas(t->kernels()[0].source, "sm_90") == "");
    }
    CHECK(xe.argmax(1).to_vector<int32_t>() == x.argmax(1).to_vector<int32_t>());
    check_close(xe.softmax(1).to_vector<float>(), x.softmax(1).to_vector<float>(), 1e-6f);
}

// A padded row's vector load has a gate per lane (the lanes over the padding are off): the
// host program reads the lanes on one by one, each checked against its buffer (the first lane's
// address lies before the row), and the PTX masks them (LLVM splits llvm.masked.load into
// guarded loads).
TEST_CASE("EMU: a padded row's masked vector load reads only the lanes on") {
    constexpr int64_t C = 8;
    std::vector<float> xs(static_cast<size_t>(C * 14 * 14)), ss, bs;
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 89);
    for (int64_t c = 0; c < C; ++c) {
        ss.push_back(static_cast<float>(c + 1));
        bs.push_back(static_cast<float>(-c));
    }
    const Tensor x = Tensor::from_vector(xs, {C, 14, 14});
    const Tensor s = Tensor::from_vector(ss, {C, 1, 1});
    const Tensor b = Tensor::from_vector(bs, {C, 1, 1});
    const Tensor y = (x * s + b).pad({{0, 0}, {1, 1}, {1, 1}});
    const std::vector<ScheduledKernel> ks = schedule_graph(y.uop()); // (before y is realized)
    REQUIRE(ks.size() == 1);
    const std::vector<float> want = y.to_vector<float>(); // on the CPU
    const codegen::DeviceLimits lim = runtime::emu_limits();
    using codegen::OptOp;
    for (const std::vector<codegen::Opt>& opts :
         {std::vector<codegen::Opt>{{OptOp::Upcast, 2, 4}},
          std::vector<codegen::Opt>{{OptOp::Upcast, 2, 4}, {OptOp::Upcast, 1, 2}}}) {
        INFO(codegen::to_string(opts));
        const codegen::LoweredKernel low = codegen::lower_kernel_opt("E", ks[0].ast, lim, &opts);
        bool masked = false;
        for (const UOp& u : low.program)
            masked = masked ||
                     (u.op() == Op::Load && u.srcs().size() == 3 && u.src(1).dtype().count == 4);
        CHECK(masked);
        const auto k = runtime::compile_emu_kernel("E_pad", low.program,
                                                   low.block[0] * low.block[1] * low.block[2]);
        CHECK(ptxas(k->source(), "sm_80") == "");
        std::vector<float> out(want.size(), -1.0f);
        std::vector<void*> bufs{out.data()};
        for (size_t i = 1; i < ks[0].params.size(); ++i) { // each input's BUFFER
            const UOp& p = ks[0].params[i];
            const Tensor& t = p.same(x.uop().src(0)) ? x : p.same(s.uop().src(0)) ? s : b;
            bufs.push_back(t.buffer()->data());
        }
        runtime::emu_launch(*k, bufs.data(), nullptr, low.grid, low.block);
        CHECK(out == want);
    }
}

TEST_CASE("EMU: GROUP and GROUPTOP as explicit opts, and the errors for what they refuse") {
    std::vector<float> v(3 * 512);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 37) % 101) - 50.0f;
    const Tensor x = Tensor::from_vector(v, {3, 512});
    const std::vector<float> want = x.sum(1).to_vector<float>();
    const std::vector<ScheduledKernel> ks = schedule_graph(x.sum(1).uop());
    REQUIRE(ks.size() == 1);
    const codegen::DeviceLimits lim = runtime::emu_limits();
    for (codegen::OptOp op : {codegen::OptOp::Group, codegen::OptOp::GroupTop}) {
        for (int64_t g : {2, 32, 512}) {
            INFO(codegen::to_string(std::vector<codegen::Opt>{{op, 1, g}}));
            const std::vector<codegen::Opt> opts{{op, 1, g}};
            const codegen::LoweredKernel low =
                codegen::lower_kernel_opt("r", ks[0].ast, lim, &opts);
            CHECK(low.block == std::array<int64_t, 3>{g, 1, 1});
            CHECK(low.grid == std::array<int64_t, 3>{3, 1, 1});
            const auto k = runtime::compile_emu_kernel("r_3_512", low.program, g);
            CHECK(k->barriers());
            CHECK(k->shared_bytes() == static_cast<size_t>((g * 4 + 15) / 16 * 16));
            std::vector<float> out(3, -1.0f);
            void* bufs[2] = {out.data(), x.buffer()->data()};
            runtime::emu_launch(*k, bufs, nullptr, low.grid, low.block);
            CHECK(out == want);
        }
    }
    codegen::OptKernel on_cpu(codegen::prepare_for_opts(ks[0].ast), codegen::DeviceLimits{});
    CHECK(error_of([&] {
              on_cpu.apply({codegen::OptOp::Group, 1, 4});
          }) == "[opt] GROUP(1, 4): the CPU device has no shared memory for a grouped reduce (use "
                "THREAD on an output axis, or UNROLL)");
    codegen::OptKernel k(codegen::prepare_for_opts(ks[0].ast), lim);
    CHECK(error_of([&] {
              k.apply({codegen::OptOp::Group, 0, 3});
          }) == "[opt] GROUP(0, 3): axis 0 is an output axis, not a reduce axis");
    CHECK(error_of([&] {
              k.apply({codegen::OptOp::GroupTop, 1, 3});
          }) == "[opt] GROUPTOP(1, 3): axis 1 has size 512, not a multiple of 3 (PADTO first)");
    codegen::OptKernel up(codegen::prepare_for_opts(ks[0].ast), lim);
    up.apply({codegen::OptOp::Upcast, 0, 3});
    CHECK(error_of([&] {
              up.apply({codegen::OptOp::Group, 0, 4});
          }) == "[opt] GROUP(0, 4): a grouped reduce in a kernel with an output UPCAST (one shared "
                "partial per thread) is not implemented yet");
    k.apply({codegen::OptOp::GroupTop, 1, 16});
    CHECK(error_of([&] {
              k.apply({codegen::OptOp::Upcast, 0, 3});
          }) ==
          "[opt] UPCAST(0, 3): an output UPCAST in a kernel with a grouped reduce (one shared "
          "partial per thread) is not implemented yet");
    CHECK(error_of([&] {
              k.apply({codegen::OptOp::Local, 0, 3});
          }) ==
          "[opt] LOCAL(0, 3): the kernel has a grouped reduce already (one group of threads per "
          "kernel)");
}

TEST_CASE("EMU: the race detector reports a GROUP reduction without its barrier") {
    const Tensor x = Tensor::ones({4, 2048}).contiguous().to("EMU");
    clear_caches(); // a plan built with the barrier must not be reused
    codegen::set_group_barrier_for_testing(false);
    const std::string e = error_of([&] { x.sum(1).realize(); });
    codegen::set_group_barrier_for_testing(true);
    clear_caches();
    // Thread 255 (a block's threads run last first) read every partial, its own and the
    // unwritten rest, before thread 254 wrote its own.
    CHECK(e == "[emu] kernel r_4_2048: block (0, 0, 0), thread (254, 0, 0): shared-memory race: "
               "STORE of shared byte 1016 read by thread (255, 0, 0) since the last "
               "barrier");
    CHECK(x.sum(1).to_vector<float>() == std::vector<float>(4, 2048.0f));
}

TEST_CASE("EMU: a barrier reached by part of a block is an error") {
    // if (thread < 2) barrier: threads 2 and 3 finish without reaching it.
    const UOp four = UOp::index(4), two = UOp::index(2);
    const UOp t = UOp::make(Op::Special, DType::Index, {four}, std::vector<int64_t>{1, 0});
    const UOp lt = t < two;
    const UOp iff = UOp::make(Op::If, DType::Void, {lt});
    const UOp bar = UOp::make(Op::Barrier, DType::Void, {});
    const UOp endif = UOp::make(Op::EndIf, DType::Void, {iff});
    const std::vector<UOp> program{four, t, two, lt, iff, bar, endif};
    const auto k = runtime::compile_emu_kernel("E_bar", program, 4);
    CHECK(k->barriers());
    CHECK(ptxas(k->source(), "sm_80") == "");
    CHECK(error_of([&] {
              runtime::emu_launch(*k, nullptr, nullptr, {1, 1, 1}, {4, 1, 1});
          }) ==
          "[emu] kernel E_bar: block (0, 0, 0), thread (1, 0, 0): waits at the barrier at position "
          "5, which thread (3, 0, 0) finished without reaching (a barrier reached by part of the "
          "block)");
    runtime::emu_launch(*k, nullptr, nullptr, {1, 1, 1}, {2, 1, 1}); // every thread reaches it
}

TEST_CASE("EMU: cp.async lands at the wait that retires it") {
    // Hand-written: thread t copies in[4 t .. 4 t + 3] to shared memory (COPY_ASYNC, 16 bytes;
    // thread 7's source gated off: zeros), then out[4 t ..] = shared[4 ((t + 1) % 8) ..].
    const UOp eight = UOp::index(8), four = UOp::index(4), one = UOp::index(1);
    const DType v4 = DType::Float32.vec(4);
    const UOp out = UOp::make(Op::Param, DType::Float32.ptr(), {}, std::vector<int64_t>{0, 32});
    const UOp in = UOp::make(Op::Param, DType::Float32.ptr(), {}, std::vector<int64_t>{1, 32});
    const UOp smem = UOp::make(Op::DefineLocal, DType::Float32.ptr(AddrSpace::Local), {},
                               std::vector<int64_t>{32, 0});
    const UOp t = UOp::make(Op::Special, DType::Index, {eight}, std::vector<int64_t>{1, 0});
    const UOp at = t * four, seven = UOp::index(7), valid = t < seven;
    const UOp src = UOp::make(Op::Index, v4.ptr(), {in, at, valid});
    const UOp dst = UOp::make(Op::Index, v4.ptr(AddrSpace::Local), {smem, at});
    const UOp cp = UOp::make(Op::CopyAsync, DType::Void, {dst, src});
    const UOp wait = UOp::make(Op::AsyncWait, DType::Void, {cp}, std::vector<int64_t>{0});
    const UOp bar = UOp::make(Op::Barrier, DType::Void, {});
    const UOp next = t + one, wrap = next % eight, from = wrap * four;
    const UOp sidx = UOp::make(Op::Index, v4.ptr(AddrSpace::Local), {smem, from});
    const UOp ld = UOp::make(Op::Load, v4, {sidx});
    const UOp oidx = UOp::make(Op::Index, v4.ptr(), {out, at});
    const UOp st = UOp::make(Op::Store, DType::Void, {oidx, ld});
    const std::vector<UOp> head{eight, four, one, out, in, smem, t, at, seven, valid, src, dst, cp};
    const std::vector<UOp> tail{bar, next, wrap, from, sidx, ld, oidx, st};
    std::vector<float> input(32), output(32, NAN);
    for (size_t i = 0; i < 32; ++i) input[i] = static_cast<float>(i + 1);
    void* bufs[2] = {output.data(), input.data()};
    const auto program = [&](bool waits, bool last) {
        std::vector<UOp> p = head;
        if (waits && !last) p.push_back(wait);
        p.insert(p.end(), tail.begin(), tail.end());
        if (waits && last) p.push_back(wait);
        return p;
    };
    const auto good = runtime::compile_emu_kernel("E_cp", program(true, false), 8);
    CHECK(ptxas(good->source(), "sm_80") == "");
    CHECK(count_of(good->source(), "cp.async.cg.shared.global") == 1);
    runtime::emu_launch(*good, bufs, nullptr, {1, 1, 1}, {8, 1, 1});
    std::vector<float> want(32);
    for (size_t i = 0; i < 32; ++i)
        want[i] = i < 24 ? static_cast<float>(i + 5) : i < 28 ? 0.0f : static_cast<float>(i - 27);
    CHECK(output == want);
    const auto launch_error = [&](const auto& k) {
        return error_of([&] { runtime::emu_launch(*k, bufs, nullptr, {1, 1, 1}, {8, 1, 1}); });
    };
    // The wait after the reads: thread 0 reads thread 1's copy before it lands (the copy's
    // bytes land at thread 1's wait, after the barrier: a race with thread 0's read).
    const auto late = runtime::compile_emu_kernel("E_cp_late", program(true, true), 8);
    CHECK(launch_error(late) ==
          "[emu] kernel E_cp_late: block (0, 0, 0), thread (1, 0, 0): shared-memory race: STORE "
          "of shared byte 16 read by thread (0, 0, 0) since the last barrier");
    // A source 4 bytes past a 16-byte boundary: the hardware's cp.async would fault (threads
    // run last first; thread 7's source is gated off, nothing is read).
    const UOp at1 = at + one;
    const UOp src1 = UOp::make(Op::Index, v4.ptr(), {in, at1, valid});
    const UOp cp1 = UOp::make(Op::CopyAsync, DType::Void, {dst, src1});
    const UOp wait1 = UOp::make(Op::AsyncWait, DType::Void, {cp1}, std::vector<int64_t>{0});
    const auto shifted = runtime::compile_emu_kernel(
        "E_cp_shifted",
        {eight, four, one, out, in, smem, t, at, seven, valid, dst, at1, src1, cp1, wait1}, 8);
    CHECK(launch_error(shifted) ==
          "[emu] kernel E_cp_shifted: block (0, 0, 0), thread (6, 0, 0): COPY_ASYNC of 16 bytes "
          "from a global address 4 bytes past an aligned one (cp.async needs both aligned to its "
          "size)");
    // No wait at all: the copy never lands.
    const auto never = runtime::compile_emu_kernel("E_cp_never", program(false, false), 8);
    CHECK(launch_error(never) ==
          "[emu] kernel E_cp_never: block (0, 0, 0), thread (0, 0, 0): 1 asynchronous copy to "
          "shared memory never retired by an ASYNC_WAIT (cp.async.wait_group)");
}

TEST_CASE("EMU: ldmatrix gives each lane its values of the 8 x 8 matrices, as PTX says") {
    // Hand-written: shared memory holds 4 matrices of 8 x 8 (value 64 q + 8 r + c at matrix q,
    // row r, column c), each row 16 bytes at 32-byte strides; lane l gives the address of row
    // l % 8 of matrix (l / 8) % count (PTX: lane 8 q + r gives row r of matrix q); every lane
    // stores what it receives.
    const UOp eight = UOp::index(8), n32 = UOp::index(32), sixteen = UOp::index(16);
    const DType h = DType::Float16;
    const UOp in = UOp::make(Op::Param, h.ptr(), {}, std::vector<int64_t>{1, 512});
    const UOp out = UOp::make(Op::Param, h.ptr(), {}, std::vector<int64_t>{0, 32 * 8});
    const UOp smem =
        UOp::make(Op::DefineLocal, h.ptr(AddrSpace::Local), {}, std::vector<int64_t>{512, 0});
    const UOp l = UOp::make(Op::Special, DType::Index, {n32}, std::vector<int64_t>{1, 0});
    // Fill: lane l copies the 16 elements l * 16 .. l * 16 + 15.
    const UOp at16 = l * sixteen;
    const UOp src = UOp::make(Op::Index, h.vec(8).ptr(), {in, at16});
    const UOp v = UOp::make(Op::Load, h.vec(8), {src});
    const UOp dst = UOp::make(Op::Index, h.vec(8).ptr(AddrSpace::Local), {smem, at16});
    const UOp put = UOp::make(Op::Store, DType::Void, {dst, v});
    const UOp at8 = at16 + eight;
    const UOp src2 = UOp::make(Op::Index, h.vec(8).ptr(), {in, at8});
    const UOp v2 = UOp::make(Op::Load, h.vec(8), {src2});
    const UOp dst2 = UOp::make(Op::Index, h.vec(8).ptr(AddrSpace::Local), {smem, at8});
    const UOp put2 = UOp::make(Op::Store, DType::Void, {dst2, v2});
    const UOp bar = UOp::make(Op::Barrier, DType::Void, {put, put2});
    std::vector<float> mem(512);
    for (size_t q = 0; q < 4; ++q)
        for (size_t r = 0; r < 8; ++r)
            for (size_t c = 0; c < 8; ++c)
                mem[q * 128 + r * 16 + c] = static_cast<float>(64 * q + 8 * r + c);
    const Tensor input = Tensor::from_vector(mem, {512}, h);
    for (const int64_t count : {1, 2, 4})
        for (const int64_t trans : {0, 1}) {
            INFO("x" << count << std::string(trans != 0 ? ".trans" : ""));
            const UOp cnt = UOp::index(count);
            const UOp row = l % eight, lq = l / eight, mat = lq % cnt;
            const UOp c128 = UOp::index(128), base = mat * c128, step = row * sixteen;
            const UOp off = base + step;
            const UOp after = UOp::make(Op::After, smem.dtype(), {smem, bar});
            const UOp ridx = UOp::make(Op::Index, h.vec(8).ptr(AddrSpace::Local), {after, off});
            const DType rt = h.vec(static_cast<uint16_t>(2 * count));
            const UOp ld = UOp::make(Op::LdMatrix, rt, {ridx}, std::vector<int64_t>{count, trans});
            const UOp oat = l * eight;
            const UOp oidx = UOp::make(Op::Index, rt.ptr(), {out, oat});
            const UOp st = UOp::make(Op::Store, DType::Void, {oidx, ld});
            const std::vector<UOp> program{eight, n32, sixteen, in,   out, smem, l,    at16,
                                           src,   v,   dst,     put,  at8, src2, v2,   dst2,
                                           put2,  bar, cnt,     row,  lq,  mat,  c128, base,
                                           step,  off, after,   ridx, ld,  oat,  oidx, st};
            const auto k = runtime::compile_emu_kernel("E_ldm", program, 32);
            CHECK(ptxas(k->source(), "sm_80") == "");
            CHECK(count_of(k->source(), "ldmatrix.sync.aligned.m8n8.x" + std::to_string(count) +
                                            (trans != 0 ? ".trans" : "") + ".shared.b16") == 1);
            Tensor o = Tensor::zeros({32 * 8}, h);
            o.realize();
            void* bufs[2] = {o.buffer()->data(), input.buffer()->data()};
            runtime::emu_launch(*k, bufs, nullptr, {1, 1, 1}, {32, 1, 1});
            const std::vector<float> got = o.to_vector<float>();
            size_t wrong = 0;
            for (size_t lane = 0; lane < 32; ++lane)
                for (size_t q = 0; q < static_cast<size_t>(count); ++q)
                    for (size_t e = 0; e < 2; ++e) {
                        // Register q of lane l: matrix q's row l / 4, columns 2 (l % 4) + e; or
                        // transposed, row 2 (l % 4) + e of column l / 4.
                        const size_t r = trans != 0 ? 2 * (lane % 4) + e : lane / 4;
                        const size_t c = trans != 0 ? lane / 4 : 2 * (lane % 4) + e;
                        wrong +=
                            got[lane * 8 + 2 * q + e] != static_cast<float>(64 * q + 8 * r + c);
                    }
            CHECK(wrong == 0);
        }
    // A row address off a 16-byte boundary is an error (the hardware's would be misaligned).
    const UOp two = UOp::index(2);
    const UOp after = UOp::make(Op::After, smem.dtype(), {smem, bar});
    const UOp off = at16 + two;
    const UOp ridx = UOp::make(Op::Index, h.vec(8).ptr(AddrSpace::Local), {after, off});
    const UOp ld = UOp::make(Op::LdMatrix, h.vec(8), {ridx}, std::vector<int64_t>{4, 0});
    const UOp oat = l * eight;
    const UOp oidx = UOp::make(Op::Index, h.vec(8).ptr(), {out, oat});
    const UOp st = UOp::make(Op::Store, DType::Void, {oidx, ld});
    const auto bad = runtime::compile_emu_kernel(
        "E_ldm_bad", {eight, n32, sixteen, in,   out, smem, l,     at16, src,  v,  dst, put,  at8,
                      src2,  v2,  dst2,    put2, bar, two,  after, off,  ridx, ld, oat, oidx, st},
        32);
    Tensor o = Tensor::zeros({32 * 8}, h);
    o.realize();
    void* bufs[2] = {o.buffer()->data(), input.buffer()->data()};
    CHECK(error_of([&] {
              runtime::emu_launch(*bad, bufs, nullptr, {1, 1, 1}, {32, 1, 1});
          }) == "[emu] kernel E_ldm_bad: block (0, 0, 0), thread (0, 0, 0): LDMATRIX row address 4 "
                "bytes past a 16-byte boundary (ldmatrix needs 16-byte aligned rows)");
}

TEST_CASE("EMU: one kernel for every batch size, the batch on a grid dim sized at launch") {
    clear_caches();
    const DefaultDevice emu("EMU");
    const Dim batch = Dim::variable("batch", 1, 64);
    const Tensor w = Tensor::from_vector(values(16 * 32, 1), {16, 32});
    const Tensor bias = Tensor::from_vector(values(32, 2), {32});
    size_t kernels = 0;
    std::string ptx;
    for (int64_t b = 1; b <= 40; b += 3) {
        const std::vector<float> xv = values(static_cast<size_t>(b * 16), static_cast<uint32_t>(b));
        const Tensor x = Tensor::from_vector(xv, {batch.bind(b), 16});
        Tensor y = (x.matmul(w) + bias).relu();
        y.realize();
        CHECK(y.device() == "EMU");
        const Tensor xc = Tensor::from_vector(xv, {b, 16}).to("CPU");
        check_close(y.to_vector<float>(),
                    (xc.matmul(w.to("CPU")) + bias.to("CPU")).relu().to_vector<float>(), 1e-5f);
        if (kernels == 0) {
            kernels = y.kernels().size();
            ptx = y.kernels().at(0).source;
        }
        CHECK(y.kernels().size() == kernels);
        CHECK(y.kernels().at(0).source == ptx); // the same kernel for every size
    }
    // The rows run to the variable on a grid dim of their own, not as a loop in each thread.
    CHECK(ptx.find("%ctaid.z") != std::string::npos);
    CHECK(ptxas(ptx, "sm_80") == "");
}
