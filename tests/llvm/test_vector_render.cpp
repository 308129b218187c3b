// Vector dtypes in the CPU renderer (docs/KERNEL_IR.md section 2): linearized kernels with
// T.vec(n) values, VECTORIZE, GEP, vector loads and stores through INDEX and vector accumulators
// in DEFINE_REG, built by hand, compiled with compile_cpu_kernel and run on real buffers.
#include <doctest/doctest.h>

#include "../support.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "prog.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/error.hpp"
#include "tempura/ir/uop.hpp"

namespace {

using tempura::AddrSpace;
using tempura::AxisType;
using tempura::DType;
using tempura::Op;
using tempura::RangeArg;
using tempura::UOp;
using tempura::runtime::compile_cpu_kernel;

using tempura_test::Prog;

// Straight-line kernels, buffer k -> bufs[k].
void run(const std::vector<UOp>& prog, std::vector<void*> bufs) {
    auto k = compile_cpu_kernel("vec", prog);
    k->run(bufs.data(), nullptr);
}

} // namespace

TEST_CASE("vector triad: d = a * b + c with <16 x float> loads and stores over a RANGE") {
    const int64_t N = 64, W = 16;
    const DType v16 = DType::Float32.vec(W);
    Prog p;
    UOp a = p.param(DType::Float32, 0, N);
    UOp b = p.param(DType::Float32, 1, N);
    UOp c = p.param(DType::Float32, 2, N);
    UOp d = p.param(DType::Float32, 3, N);
    UOp r = p.range(p.idx(N / W), 0);
    UOp i = p.alu(Op::Mul, {r, p.idx(W)});
    UOp x = p.load(p.index(a, i, v16));
    UOp y = p.load(p.index(b, i, v16));
    UOp z = p.load(p.index(c, i, v16));
    p.store(p.index(d, i, v16), p.alu(Op::Add, {p.alu(Op::Mul, {x, y}), z}));
    p.end(r);

    std::vector<float> av(N), bv(N), cv(N), dv(N, -1.0f);
    for (int64_t k = 0; k < N; ++k) {
        av[k] = static_cast<float>(k % 9 - 4);
        bv[k] = static_cast<float>(k % 5);
        cv[k] = static_cast<float>(k);
    }
    auto kern = compile_cpu_kernel("triad16", p.ops);
    void* bufs[] = {av.data(), bv.data(), cv.data(), dv.data()};
    kern->run(bufs, nullptr);
    for (int64_t k = 0; k < N; ++k) {
        CAPTURE(k);
        CHECK(dv[k] == av[k] * bv[k] + cv[k]);
    }
    // The loads stay <16 x float> and are aligned to one float, not to the vector.
    const std::string& ir = kern->source();
    const size_t at = ir.find("load <16 x float>");
    REQUIRE(at != std::string::npos);
    const std::string line = ir.substr(at, ir.find('\n', at) - at);
    CHECK(line.find("align 4") != std::string::npos);

    SUBCASE("unaligned: the vectors start at odd elements") {
        Prog q;
        UOp qa = q.param(DType::Float32, 0, N);
        UOp qd = q.param(DType::Float32, 1, N);
        UOp i1 = q.idx(1);
        UOp xv = q.load(q.index(qa, i1, v16));
        q.store(q.index(qd, q.idx(3), v16),
                q.add(UOp::make(Op::MulAcc, v16, {xv, xv, q.c(v16, 0.5)})));
        std::vector<float> out(N, 0.0f);
        run(q.ops, {av.data(), out.data()});
        for (int64_t k = 0; k < N; ++k) {
            CAPTURE(k);
            CHECK(out[k] == (k >= 3 && k < 3 + W ? av[k - 2] * av[k - 2] + 0.5f : 0.0f));
        }
    }
}

TEST_CASE("a <8 x float> accumulator in a DEFINE_REG, then a horizontal sum through GEPs") {
    const int64_t N = 256, W = 8;
    const DType v8 = DType::Float32.vec(W);
    Prog p;
    UOp a = p.param(DType::Float32, 0, N);
    UOp out = p.param(DType::Float32, 1, 1);
    UOp acc = p.reg(v8, 1); // one <8 x float>
    UOp acc0 = p.index(acc, p.idx(0));
    CHECK(acc0.dtype() == v8.ptr(AddrSpace::Reg));
    p.store(acc0, p.c(v8, 0.0)); // a splat of 0
    UOp r = p.range(p.idx(N / W), 0);
    UOp x = p.load(p.index(a, p.alu(Op::Mul, {r, p.idx(W)}), v8));
    p.store(acc0, p.alu(Op::Add, {p.load(acc0), x}));
    UOp e = p.end(r);
    UOp total = p.load(p.index(p.after(acc, e), p.idx(0)));
    UOp s = p.gep(total, {0});
    for (int64_t l = 1; l < W; ++l) s = p.alu(Op::Add, {s, p.gep(total, {l})});
    CHECK(s.dtype() == DType::Float32);
    p.store(p.index(out, p.idx(0)), s);

    std::vector<float> in(N);
    float want = 0;
    for (int64_t k = 0; k < N; ++k) {
        in[k] = static_cast<float>(k % 13 - 5);
        want += in[k];
    }
    auto kern = compile_cpu_kernel("vacc", p.ops);
    std::vector<float> res(1, -1.0f);
    void* bufs[] = {in.data(), res.data()};
    kern->run(bufs, nullptr);
    CHECK(res[0] == want);
    // The accumulator lives in registers: SROA promoted the alloca.
    CHECK(kern->source().find("alloca") == std::string::npos);

    SUBCASE("a DEFINE_REG of two vectors: INDEX(reg, i) addresses vector i") {
        Prog q;
        UOp qa = q.param(DType::Float32, 0, N);
        UOp qo = q.param(DType::Float32, 1, 2 * W);
        UOp two = q.add(UOp::make(Op::DefineReg, v8.ptr(AddrSpace::Reg), {},
                                  std::vector<int64_t>{2, 7})); // {count, id}
        UOp r0 = q.index(two, q.idx(0));
        UOp r1 = q.index(two, q.idx(1));
        q.store(r0, q.load(q.index(qa, q.idx(0), v8)));
        q.store(r1, q.load(q.index(qa, q.idx(W), v8)));
        // Swap the two vectors on the way out.
        q.store(q.index(qo, q.idx(0), v8), q.load(r1));
        q.store(q.index(qo, q.idx(W), v8), q.load(r0));
        std::vector<float> o(2 * W);
        run(q.ops, {in.data(), o.data()});
        for (int64_t k = 0; k < W; ++k) {
            CHECK(o[k] == in[W + k]);
            CHECK(o[W + k] == in[k]);
        }
    }
}

TEST_CASE("GEP: a shuffle of several lanes and the extract of one") {
    const DType v8 = DType::Int32.vec(8);
    Prog p;
    UOp in = p.param(DType::Int32, 0, 8);
    UOp rev = p.param(DType::Int32, 1, 8);
    UOp three = p.param(DType::Int32, 2, 3);
    UOp one = p.param(DType::Int32, 3, 1);
    UOp x = p.load(p.index(in, p.idx(0), v8));
    UOp r = p.gep(x, {7, 6, 5, 4, 3, 2, 1, 0});
    CHECK(r.dtype() == v8);
    p.store(p.index(rev, p.idx(0), v8), r);
    UOp t = p.gep(x, {5, 5, 1});
    CHECK(t.dtype() == DType::Int32.vec(3));
    p.store(p.index(three, p.idx(0), t.dtype()), t);
    UOp s = p.gep(x, {6});
    CHECK(s.dtype() == DType::Int32);
    p.store(p.index(one, p.idx(0)), s);

    std::vector<int32_t> iv{10, 11, 12, 13, 14, 15, 16, 17}, rv(8), tv(3), ov(1);
    run(p.ops, {iv.data(), rv.data(), tv.data(), ov.data()});
    CHECK(rv == std::vector<int32_t>{17, 16, 15, 14, 13, 12, 11, 10});
    CHECK(tv == std::vector<int32_t>{15, 15, 11});
    CHECK(ov == std::vector<int32_t>{16});
}

TEST_CASE("VECTORIZE of distinct scalars and of one repeated scalar (a splat)") {
    const DType v4 = DType::Float32.vec(4);
    Prog p;
    UOp in = p.param(DType::Float32, 0, 4);
    UOp o1 = p.param(DType::Float32, 1, 4);
    UOp o2 = p.param(DType::Float32, 2, 4);
    std::vector<UOp> xs;
    for (int64_t k = 0; k < 4; ++k) xs.push_back(p.load(p.index(in, p.idx(k))));
    // Lanes in another order than memory: [x2, x0, x3, x1] + 1
    UOp v = p.vectorize({xs[2], xs[0], xs[3], xs[1]});
    CHECK(v.dtype() == v4);
    p.store(p.index(o1, p.idx(0), v4), p.alu(Op::Add, {v, p.c(v4, 1.0)}));
    UOp sp = p.vectorize({xs[3], xs[3], xs[3], xs[3]});
    p.store(p.index(o2, p.idx(0), v4), p.alu(Op::Mul, {sp, p.c(v4, 2.0)}));

    std::vector<float> iv{1.5f, -2.0f, 3.25f, 8.0f}, a(4), b(4);
    run(p.ops, {iv.data(), a.data(), b.data()});
    CHECK(a == std::vector<float>{4.25f, 2.5f, 9.0f, -1.0f});
    CHECK(b == std::vector<float>{16.0f, 16.0f, 16.0f, 16.0f});

    SUBCASE("a VECTORIZE of bools and of constants") {
        Prog q;
        UOp qo = q.param(DType::Bool, 0, 4);
        UOp t = q.add(UOp::boolean(true));
        UOp f = q.add(UOp::boolean(false));
        q.store(q.index(qo, q.idx(0), DType::Bool.vec(4)), q.vectorize({t, f, f, t}));
        std::vector<uint8_t> bo(4, 7);
        run(q.ops, {bo.data()});
        CHECK(bo == std::vector<uint8_t>{1, 0, 0, 1});
    }
}

TEST_CASE("vector compare and WHERE: an elementwise minimum and its mask") {
    const int64_t W = 8;
    const DType v8 = DType::Float32.vec(W);
    Prog p;
    UOp a = p.param(DType::Float32, 0, W);
    UOp b = p.param(DType::Float32, 1, W);
    UOp mn = p.param(DType::Float32, 2, W);
    UOp mask = p.param(DType::Bool, 3, W);
    UOp x = p.load(p.index(a, p.idx(0), v8));
    UOp y = p.load(p.index(b, p.idx(0), v8));
    UOp lt = p.alu(Op::CmpLt, {x, y});
    CHECK(lt.dtype() == DType::Bool.vec(W));
    p.store(p.index(mn, p.idx(0), v8), p.alu(Op::Where, {lt, x, y}));
    p.store(p.index(mask, p.idx(0), lt.dtype()), lt);

    std::vector<float> av{1, 5, -3, 4, 0, 9, 2, 2}, bv{2, 4, -4, 4, 1, -9, 3, 1}, mv(W);
    std::vector<uint8_t> kv(W, 9);
    run(p.ops, {av.data(), bv.data(), mv.data(), kv.data()});
    CHECK(mv == std::vector<float>{1, 4, -4, 4, 0, -9, 2, 1});
    CHECK(kv == std::vector<uint8_t>{1, 0, 0, 0, 1, 0, 1, 0});

    SUBCASE("maximum, sqrt and trunc on vectors") {
        Prog q;
        UOp qa = q.param(DType::Float32, 0, W);
        UOp qb = q.param(DType::Float32, 1, W);
        UOp qo = q.param(DType::Float32, 2, W);
        UOp m =
            q.alu(Op::Max, {q.load(q.index(qa, q.idx(0), v8)), q.load(q.index(qb, q.idx(0), v8))});
        // trunc(sqrt(4 m^2 + 1)) == 2 |m| for these small m
        UOp m2 = q.alu(Op::Mul, {m, m});
        UOp y = q.add(UOp::make(Op::MulAcc, v8, {m2, q.c(v8, 4.0), q.c(v8, 1.0)}));
        q.store(q.index(qo, q.idx(0), v8), q.alu(Op::Trunc, {q.alu(Op::Sqrt, {y})}));
        std::vector<float> o(W);
        run(q.ops, {av.data(), bv.data(), o.data()});
        CHECK(o == std::vector<float>{4, 10, 6, 8, 2, 18, 6, 4});
    }
}

TEST_CASE("vector CAST int32x8 -> float32x8 and back") {
    const DType i8v = DType::Int32.vec(8), f8v = DType::Float32.vec(8);
    Prog p;
    UOp in = p.param(DType::Int32, 0, 8);
    UOp out = p.param(DType::Float32, 1, 8);
    UOp back = p.param(DType::Int32, 2, 8);
    UOp f = p.cast(p.load(p.index(in, p.idx(0), i8v)), f8v);
    CHECK(f.dtype() == f8v);
    UOp h = p.alu(Op::Mul, {f, p.c(f8v, 0.5)});
    p.store(p.index(out, p.idx(0), f8v), h);
    p.store(p.index(back, p.idx(0), i8v), p.cast(h, i8v));

    std::vector<int32_t> iv{-7, -1, 0, 1, 2, 3, 16777216, -100}, bv(8);
    std::vector<float> ov(8);
    run(p.ops, {iv.data(), ov.data(), bv.data()});
    for (size_t k = 0; k < 8; ++k) {
        CAPTURE(k);
        CHECK(ov[k] == static_cast<float>(iv[k]) * 0.5f);
        CHECK(bv[k] == static_cast<int32_t>(static_cast<float>(iv[k]) * 0.5f));
    }
}

TEST_CASE("bool vectors: loaded as != 0 from bytes, stored as 0 or 1") {
    const DType b8 = DType::Bool.vec(8);
    Prog p;
    UOp in = p.param(DType::Bool, 0, 8);
    UOp out = p.param(DType::Bool, 1, 8);
    UOp cnt = p.param(DType::Int32, 2, 8);
    UOp x = p.load(p.index(in, p.idx(0), b8));
    CHECK(x.dtype() == b8);
    p.store(p.index(out, p.idx(0), b8), p.alu(Op::Not, {x}));
    p.store(p.index(cnt, p.idx(0), DType::Int32.vec(8)), p.cast(x, DType::Int32.vec(8)));

    std::vector<uint8_t> iv{0, 1, 2, 0, 255, 0, 128, 1}, ov(8, 7);
    std::vector<int32_t> cv(8, -1);
    run(p.ops, {iv.data(), ov.data(), cv.data()});
    CHECK(ov == std::vector<uint8_t>{1, 0, 0, 1, 0, 1, 0, 0});
    CHECK(cv == std::vector<int32_t>{0, 1, 1, 0, 1, 0, 1, 1});
}

TEST_CASE("gated vector loads: alt, without touching memory, when the gate is false") {
    // out[4r .. 4r+3] = r < 2 ? a[4r .. 4r+3] : alt, where the address is 2^40 elements away
    // (far outside any mapping) when the gate is false: loading it would crash.
    const int64_t W = 4, R = 4;
    const DType v4 = DType::Float32.vec(W);
    auto build = [&](bool gate_on_index) {
        Prog p;
        UOp a = p.param(DType::Float32, 0, 2 * W);
        UOp out = p.param(DType::Float32, 1, R * W);
        UOp r = p.range(p.idx(R), 0);
        UOp gate = p.alu(Op::CmpLt, {r, p.idx(2)});
        UOp i = p.alu(Op::Mul, {r, p.idx(W)});
        UOp far = p.alu(Op::Add, {i, p.idx(int64_t{1} << 40)});
        UOp at = p.alu(Op::Where, {gate, i, far});
        UOp x;
        if (gate_on_index) // INDEX(ptr, i, gate), LOAD without alt: zeros
            x = p.load(p.gated_index(a, at, gate, v4));
        else
            x = p.load(p.index(a, at, v4), gate, p.c(v4, -1.0));
        p.store(p.index(out, i, v4), x);
        p.end(r);
        return p.ops;
    };
    std::vector<float> in{1, 2, 3, 4, 5, 6, 7, 8};
    for (bool on_index : {false, true}) {
        CAPTURE(on_index);
        std::vector<float> out(R * W, 99.0f);
        run(build(on_index), {in.data(), out.data()});
        for (int64_t k = 0; k < R * W; ++k) {
            CAPTURE(k);
            CHECK(out[k] == (k < 2 * W ? in[k] : on_index ? 0.0f : -1.0f));
        }
    }
}

TEST_CASE("integer vector IDIV and MOD do not trap: x / 0 == 0, INT_MIN / -1 == INT_MIN") {
    const DType v8 = DType::Int32.vec(8);
    const int32_t lo = std::numeric_limits<int32_t>::min();
    Prog p;
    UOp a = p.param(DType::Int32, 0, 8);
    UOp b = p.param(DType::Int32, 1, 8);
    UOp q = p.param(DType::Int32, 2, 8);
    UOp m = p.param(DType::Int32, 3, 8);
    UOp qc = p.param(DType::Int32, 4, 8);
    UOp qn = p.param(DType::Int32, 5, 8);
    UOp x = p.load(p.index(a, p.idx(0), v8));
    UOp y = p.load(p.index(b, p.idx(0), v8));
    p.store(p.index(q, p.idx(0), v8), p.alu(Op::Idiv, {x, y}));
    p.store(p.index(m, p.idx(0), v8), p.alu(Op::Mod, {x, y}));
    // A constant splat divisor: plain sdiv/srem ...
    p.store(p.index(qc, p.idx(0), v8),
            p.alu(Op::Add, {p.alu(Op::Idiv, {x, p.ci(v8, 4)}), p.alu(Op::Mod, {x, p.ci(v8, 3)})}));
    // ... but not when it is -1.
    p.store(p.index(qn, p.idx(0), v8), p.alu(Op::Idiv, {x, p.ci(v8, -1)}));

    std::vector<int32_t> av{7, -7, 100, lo, 5, -5, 13, lo}, bv{2, -2, -7, -1, 0, 0, 5, 1};
    std::vector<int32_t> qv(8), mv(8), cv(8), nv(8);
    run(p.ops, {av.data(), bv.data(), qv.data(), mv.data(), cv.data(), nv.data()});
    CHECK(qv == std::vector<int32_t>{3, 3, -14, lo, 0, 0, 2, lo});
    CHECK(mv == std::vector<int32_t>{1, -1, 2, 0, 0, 0, 3, 0});
    for (size_t k = 0; k < 8; ++k) {
        CAPTURE(k);
        CHECK(cv[k] == av[k] / 4 + av[k] % 3);
        CHECK(nv[k] == (av[k] == lo ? lo : -av[k]));
    }
}

TEST_CASE("vector programs that break the contract throw tempura::Error with exact messages") {
    const DType v4 = DType::Float32.vec(4);
    SUBCASE("a GEP lane out of range") {
        Prog p;
        UOp in = p.param(DType::Float32, 0, 4);
        UOp x = p.load(p.index(in, p.idx(0), v4));
        // Refused when the GEP is built, before any backend sees it.
        CHECK(error_of([&] { UOp::make(Op::Gep, DType::Float32, {x}, std::vector<int64_t>{4}); }) ==
              "[uop] GEP of lanes [4] of a float32x4 cannot be a float32");
    }
    SUBCASE("a GEP whose dtype disagrees with its lane count") {
        Prog p;
        UOp in = p.param(DType::Float32, 0, 4);
        UOp x = p.load(p.index(in, p.idx(0), v4));
        CHECK(error_of([&] {
                  UOp::make(Op::Gep, v4, {x}, std::vector<int64_t>{0, 1});
              }) == "[uop] GEP of lanes [0, 1] of a float32x4 cannot be a float32x4");
    }
    SUBCASE("a VECTORIZE with the wrong number of sources") {
        Prog p;
        UOp one = p.c(DType::Float32, 1.0);
        UOp two = p.c(DType::Float32, 2.0);
        p.add(UOp::make(Op::Vectorize, v4, {one, two, one}));
        CHECK(error_of([&] { compile_cpu_kernel("bad_vectorize", p.ops); }) ==
              "[cpu] kernel 'bad_vectorize', position 2: cannot render VECTORIZE of dtype "
              "float32x4: it takes 4 sources of dtype float32, got 3");
    }
    SUBCASE("a vector op with a scalar operand") {
        Prog p;
        UOp in = p.param(DType::Float32, 0, 4);
        UOp x = p.load(p.index(in, p.idx(0), v4));
        UOp s = p.c(DType::Float32, 2.0);
        p.add(UOp::make(Op::Mul, v4, {x, s}));
        CHECK(error_of([&] { compile_cpu_kernel("bad_mix", p.ops); }) ==
              "[cpu] kernel 'bad_mix', position 5: cannot render MUL of dtype float32x4: source 1 "
              "has dtype float32, expected float32x4");
    }
    SUBCASE("a comparison and a cast that change the number of lanes") {
        Prog p;
        UOp in = p.param(DType::Float32, 0, 4);
        UOp x = p.load(p.index(in, p.idx(0), v4));
        p.add(UOp::make(Op::CmpLt, DType::Bool, {x, x}));
        CHECK(error_of([&] { compile_cpu_kernel("bad_cmp", p.ops); }) ==
              "[cpu] kernel 'bad_cmp', position 4: cannot render CMPLT of dtype bool: a "
              "comparison of float32x4 yields boolx4");
        Prog q;
        UOp qin = q.param(DType::Float32, 0, 4);
        UOp qx = q.load(q.index(qin, q.idx(0), v4));
        q.cast(qx, DType::Int32.vec(8));
        CHECK(error_of([&] { compile_cpu_kernel("bad_cast", q.ops); }) ==
              "[cpu] kernel 'bad_cast', position 4: cannot render CAST of dtype int32x8: a cast "
              "keeps the number of lanes (from float32x4)");
    }
    SUBCASE("a WHERE whose condition has another number of lanes") {
        Prog p;
        UOp in = p.param(DType::Float32, 0, 4);
        UOp x = p.load(p.index(in, p.idx(0), v4));
        UOp t = p.add(UOp::boolean(true));
        p.add(UOp::make(Op::Where, v4, {t, x, x}));
        CHECK(error_of([&] { compile_cpu_kernel("bad_where", p.ops); }) ==
              "[cpu] kernel 'bad_where', position 5: cannot render WHERE of dtype float32x4: "
              "WHERE's condition must be boolx4, got bool");
    }
}

TEST_CASE("every ALU op on 4-lane vectors of every dtype compiles and runs, or throws") {
    // Never a crash: out[0..3] = op(in0[0..3], in1[0..3], in2[0..3]) on T.vec(4).
    const std::vector<DType> dtypes{DType::Bool,    DType::Int8,   DType::Int16,   DType::Int32,
                                    DType::Int64,   DType::UInt8,  DType::UInt16,  DType::UInt32,
                                    DType::UInt64,  DType::Index,  DType::Float16, DType::BFloat16,
                                    DType::Float32, DType::Float64};
    alignas(64) unsigned char in[3][64], out[64];
    for (auto& row : in)
        for (size_t k = 0; k < sizeof row; ++k) row[k] = static_cast<unsigned char>(1 + k % 3);
    size_t compiled = 0, refused = 0;
    for (size_t o = 0; o < tempura::kNumOps; ++o) {
        const Op op = static_cast<Op>(o);
        if (!tempura::is_alu(op)) continue;
        const int arity = tempura::op_info(op).arity;
        for (DType t : dtypes) {
            const DType tv = t.vec(4);
            Prog p;
            std::vector<UOp> xs;
            for (int k = 0; k < arity; ++k)
                xs.push_back(p.load(p.index(p.param(t, k, 4), p.idx(0), tv)));
            UOp y;
            if (op == Op::Where) {
                xs[0] = p.cast(xs[0], DType::Bool.vec(4));
                y = p.alu(op, xs);
            } else if (op == Op::Cast || op == Op::BitCast) {
                const DType to = t == DType::Float32 ? DType::Int32 : DType::Float32;
                y = p.add(UOp::make(op, to.vec(4), xs));
            } else {
                y = p.add(UOp::make(op, tempura::is_comparison(op) ? DType::Bool.vec(4) : tv, xs));
            }
            p.store(p.index(p.param(y.dtype().scalar_type(), arity, 4), p.idx(0), y.dtype()), y);
            CAPTURE(tempura::op_name(op));
            CAPTURE(t.name());
            try {
                auto k = compile_cpu_kernel("vsweep", p.ops);
                void* bufs[] = {in[0], in[1], in[2], out};
                std::swap(bufs[arity], bufs[3]);
                k->run(bufs, nullptr);
                ++compiled;
            } catch (const tempura::Error& e) {
                const std::string msg = e.what();
                CHECK(msg.find(std::string(tempura::op_name(op))) != std::string::npos);
                ++refused;
            }
        }
    }
    MESSAGE("compiled " << compiled << ", refused " << refused);
    CHECK(compiled > 250);
}
