// The LLVM CPU backend: linearized kernels (docs/KERNEL_IR.md section 2) built by hand, compiled
// with compile_cpu_kernel and run on real buffers; the kernel cache; host CPU features; errors.
#include <doctest/doctest.h>

#include "../support.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "prog.hpp"
#include "tempura/backend/llvm_cpu.hpp"
#include "tempura/error.hpp"
#include "tempura/ir/scalar.hpp"
#include "tempura/ir/uop.hpp"

namespace {

using tempura::AxisType;
using tempura::DType;
using tempura::Op;
using tempura::RangeArg;
using tempura::UOp;
using tempura::VarArg;
using tempura::runtime::compile_cpu_kernel;

using tempura_test::Prog;

// out[i] = f(in0[i], in1[i], ...) for i < n: a loop over n with one load per input.
template <class F>
std::vector<UOp> elementwise(DType out_t, std::vector<DType> in_t, int64_t n, F&& f) {
    Prog p;
    std::vector<UOp> bufs;
    for (size_t k = 0; k < in_t.size(); ++k)
        bufs.push_back(p.param(in_t[k], static_cast<int64_t>(k), n));
    UOp out = p.param(out_t, static_cast<int64_t>(in_t.size()), n);
    UOp r = p.range(p.idx(n), 0);
    std::vector<UOp> xs;
    for (const UOp& b : bufs) xs.push_back(p.load(p.index(b, r)));
    UOp v = f(p, xs, r);
    p.store(p.index(out, r), v);
    p.end(r);
    return p.ops;
}

template <class Out, class... In>
std::vector<Out> run1(const std::vector<UOp>& prog, size_t n, const std::vector<In>&... in) {
    auto k = compile_cpu_kernel("test", prog);
    std::vector<Out> out(n);
    void* bufs[] = {const_cast<In*>(in.data())..., out.data()};
    k->run(bufs, nullptr);
    return out;
}

} // namespace

TEST_CASE("elementwise c[i] = a[i] * b[i] + 2.5 over float32") {
    const int64_t n = 1003; // not a multiple of any vector width: the remainder loop runs too
    auto prog = elementwise(
        DType::Float32, {DType::Float32, DType::Float32}, n,
        [](Prog& p, const std::vector<UOp>& x, const UOp&) {
            return p.alu(Op::Add, {p.alu(Op::Mul, {x[0], x[1]}), p.c(DType::Float32, 2.5)});
        });
    std::vector<float> a(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
        a[i] = static_cast<float>(i) * 0.5f; // products are exact: FMA or not, one result
        b[i] = static_cast<float>(i % 7 - 3);
    }
    auto k = compile_cpu_kernel("ew_mul_add", prog);
    CHECK(k->name() == "ew_mul_add");
    CHECK(k->buffer_count() == 3);
    CHECK(k->var_count() == 0);
    CHECK(k->compile_ms() > 0);
    CHECK(k->source().find("define void") != std::string::npos);
    std::vector<float> c(n, -1.0f);
    void* bufs[] = {a.data(), b.data(), c.data()};
    k->run(bufs, nullptr);
    for (int64_t i = 0; i < n; ++i) REQUIRE(c[i] == a[i] * b[i] + 2.5f);
}

TEST_CASE("sum reduction with a DEFINE_REG accumulator and nested RANGEs") {
    // out[i] = sum_j a[i*M + j]
    const int64_t N = 5, M = 37;
    Prog p;
    UOp a = p.param(DType::Float32, 0, N * M);
    UOp out = p.param(DType::Float32, 1, N);
    UOp acc = p.reg(DType::Float32, 1);
    UOp ri = p.range(p.idx(N), 0);
    UOp acc0 = p.index(acc, p.idx(0));
    p.store(acc0, p.c(DType::Float32, 0.0));
    UOp rj = p.range(p.idx(M), 1);
    UOp v = p.load(p.index(a, p.alu(Op::Add, {p.alu(Op::Mul, {ri, p.idx(M)}), rj})));
    p.store(acc0, p.alu(Op::Add, {p.load(acc0), v}));
    UOp ej = p.end(rj);
    // The accumulator read after the inner loop: AFTER orders it (and makes it a distinct node).
    UOp total = p.load(p.index(p.after(acc, ej), p.idx(0)));
    p.store(p.index(out, ri), total);
    p.end(ri);

    std::vector<float> in(N * M);
    for (int64_t i = 0; i < N * M; ++i) in[i] = static_cast<float>(i % 11);
    auto res = run1<float>(p.ops, N, in);
    for (int64_t i = 0; i < N; ++i) {
        float want = 0;
        for (int64_t j = 0; j < M; ++j) want += in[i * M + j];
        CHECK(res[i] == want);
    }
}

TEST_CASE("values defined before a loop are usable inside it and after it") {
    // out[0..3] = s + i, out[4] = s * 2, where s = 10 is computed before the loop.
    Prog p;
    UOp out = p.param(DType::Int32, 0, 5);
    UOp s = p.alu(Op::Add, {p.ci(DType::Int32, 7), p.ci(DType::Int32, 3)});
    UOp r = p.range(p.ci(DType::Int32, 4), 0);
    p.store(p.index(out, r), p.alu(Op::Add, {s, r}));
    p.end(r);
    p.store(p.index(out, p.idx(4)), p.alu(Op::Mul, {s, p.ci(DType::Int32, 2)}));
    auto res = run1<int32_t>(p.ops, 5);
    CHECK(res == std::vector<int32_t>{10, 11, 12, 13, 20});
}

TEST_CASE("int32 arithmetic that cannot wrap is nsw; arithmetic that might wraps") {
    // out[i] = a[v * 4000 + i] + a[v * 4000 + i + 2000] + 2147483647 for i < 1000, v a
    // variable in [0, 3]: the indices' bounds lie inside int32, so their multiply and adds are
    // `nsw` and LLVM widens them to the address's 64 bits, the constant 2000 becoming an
    // address offset (without `nsw`, a sign extension of each index is left: LLVM cannot bound
    // v). The loaded values' sum may wrap, and does, as two's complement.
    const int64_t n = 1000;
    Prog p;
    UOp a = p.param(DType::Int32, 0, 16 * n);
    UOp out = p.param(DType::Int32, 1, n);
    UOp v = p.var("v", 0, 3, DType::Int32);
    UOp r = p.range(p.ci(DType::Int32, n), 0);
    UOp base = p.alu(Op::Add, {p.alu(Op::Mul, {v, p.ci(DType::Int32, 4 * n)}), r});
    UOp at2 = p.alu(Op::Add, {base, p.ci(DType::Int32, 2 * n)});
    UOp sum = p.alu(Op::Add, {p.load(p.index(a, base)), p.load(p.index(a, at2))});
    p.store(p.index(out, r), p.alu(Op::Add, {sum, p.ci(DType::Int32, 2147483647)}));
    p.end(r);
    auto k = compile_cpu_kernel("nsw", p.ops);
    CHECK(k->source().find("= sext ") == std::string::npos);
    std::vector<int32_t> in(16 * n, 0), res(n, 0);
    for (int64_t i = 0; i < n; ++i) in[8 * n + i] = static_cast<int32_t>(i % 3) - 1;
    void* bufs[] = {in.data(), res.data()};
    const int64_t vars[] = {2};
    k->run(bufs, vars);
    for (int64_t i = 0; i < n; ++i) {
        const int32_t want = i % 3 == 0   ? 2147483646
                             : i % 3 == 1 ? 2147483647
                                          : std::numeric_limits<int32_t>::min();
        REQUIRE(res[i] == want);
    }
}

TEST_CASE("a gated LOAD reads alt, without touching memory, when the gate is false") {
    // out[i] = i < 4 ? a[idx] : -1, where idx is 2^40 + i (far outside any mapping) when the
    // gate is false: loading it would crash.
    const int64_t n = 64;
    Prog p;
    UOp a = p.param(DType::Float32, 0, 4);
    UOp out = p.param(DType::Float32, 1, n);
    UOp r = p.range(p.idx(n), 0);
    UOp gate = p.alu(Op::CmpLt, {r, p.idx(4)});
    UOp far = p.alu(Op::Add, {r, p.idx(int64_t{1} << 40)});
    UOp i = p.alu(Op::Where, {gate, r, far});
    UOp x = p.load(p.index(a, i), gate, p.c(DType::Float32, -1.0));
    p.store(p.index(out, r), x);
    p.end(r);
    std::vector<float> in{1.5f, 2.5f, 3.5f, 4.5f};
    auto res = run1<float>(p.ops, n, in);
    for (int64_t k = 0; k < n; ++k) CHECK(res[k] == (k < 4 ? in[k] : -1.0f));
}

TEST_CASE("a gated LOAD from an INDEX that carries the gate") {
    const int64_t n = 16;
    Prog p;
    UOp a = p.param(DType::Int32, 0, 8);
    UOp out = p.param(DType::Int32, 1, n);
    UOp r = p.range(p.idx(n), 0);
    UOp gate = p.alu(Op::CmpLt, {r, p.idx(8)});
    UOp gi = p.add(UOp::make(Op::Index, a.dtype(), {a, r, gate}));
    p.store(p.index(out, r), p.add(UOp::make(Op::Load, DType::Int32, {gi})));
    p.end(r);
    std::vector<int32_t> in{1, 2, 3, 4, 5, 6, 7, 8};
    auto res = run1<int32_t>(p.ops, n, in);
    for (int64_t k = 0; k < n; ++k) CHECK(res[k] == (k < 8 ? in[k] : 0));
}

TEST_CASE("IF/ENDIF: a gated store") {
    // for i < 10: if (i % 3 == 0) out[i] = i * 10
    Prog p;
    UOp out = p.param(DType::Int64, 0, 10);
    UOp r = p.range(p.idx(10), 0);
    UOp cond = p.alu(Op::CmpEq, {p.alu(Op::Mod, {r, p.idx(3)}), p.idx(0)});
    UOp iff = p.if_(cond);
    p.store(p.index(out, r), p.cast(p.alu(Op::Mul, {r, p.idx(10)}), DType::Int64));
    p.endif(iff);
    p.end(r);
    auto k = compile_cpu_kernel("gated_store", p.ops);
    std::vector<int64_t> res(10, -7);
    void* bufs[] = {res.data()};
    k->run(bufs, nullptr);
    for (int64_t i = 0; i < 10; ++i) CHECK(res[i] == (i % 3 == 0 ? i * 10 : -7));
}

TEST_CASE("int32 IDIV and MOD follow C (truncation toward zero, sign of the dividend)") {
    const std::vector<int32_t> a{7, -7, 7, -7, 0, 13, -13, 100, std::numeric_limits<int32_t>::min(),
                                 5, -5};
    const std::vector<int32_t> b{2, 2, -2, -2, 3, 5, 5, -7, -1, 0, 0};
    const auto n = static_cast<int64_t>(a.size());
    auto div = elementwise(DType::Int32, {DType::Int32, DType::Int32}, n,
                           [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                               return p.alu(Op::Idiv, {x[0], x[1]});
                           });
    auto mod = elementwise(DType::Int32, {DType::Int32, DType::Int32}, n,
                           [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                               return p.alu(Op::Mod, {x[0], x[1]});
                           });
    auto q = run1<int32_t>(div, a.size(), a, b);
    auto m = run1<int32_t>(mod, a.size(), a, b);
    for (size_t i = 0; i + 3 < a.size(); ++i) { // the ordinary cases: exactly C's
        CAPTURE(i);
        CHECK(q[i] == a[i] / b[i]);
        CHECK(m[i] == a[i] % b[i]);
    }
    // What C leaves undefined does not trap: INT_MIN / -1 wraps, x / 0 and x % 0 are 0.
    CHECK(q[8] == std::numeric_limits<int32_t>::min());
    CHECK(m[8] == 0);
    CHECK(q[9] == 0);
    CHECK(q[10] == 0);
    CHECK(m[9] == 0);
    CHECK(m[10] == 0);

    // Constant divisors, unsigned division.
    auto cdiv = elementwise(
        DType::Int32, {DType::Int32}, 4, [](Prog& p, const std::vector<UOp>& x, const UOp&) {
            return p.alu(Op::Add, {p.alu(Op::Idiv, {x[0], p.ci(DType::Int32, 4)}),
                                   p.alu(Op::Mod, {x[0], p.ci(DType::Int32, 3)})});
        });
    std::vector<int32_t> cin{-9, 9, -1, 22};
    auto cr = run1<int32_t>(cdiv, 4, cin);
    for (size_t i = 0; i < 4; ++i) CHECK(cr[i] == cin[i] / 4 + cin[i] % 3);
    auto udiv = elementwise(DType::UInt32, {DType::UInt32, DType::UInt32}, 3,
                            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                return p.alu(Op::Idiv, {x[0], x[1]});
                            });
    std::vector<uint32_t> ua{4000000000u, 7u, 9u}, ub{3u, 2u, 0u};
    auto ur = run1<uint32_t>(udiv, 3, ua, ub);
    CHECK(ur == std::vector<uint32_t>{1333333333u, 3u, 0u});
}

TEST_CASE("casts between float, int, unsigned and bool") {
    SUBCASE("float32 -> int32 truncates toward zero; int32 -> float32") {
        auto prog = elementwise(DType::Int32, {DType::Float32}, 5,
                                [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                    return p.cast(x[0], DType::Int32);
                                });
        std::vector<float> in{-2.7f, 2.7f, -0.5f, 1e6f, 123.0f};
        CHECK(run1<int32_t>(prog, 5, in) == std::vector<int32_t>{-2, 2, 0, 1000000, 123});
        auto back = elementwise(DType::Float32, {DType::Int32}, 3,
                                [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                    return p.cast(x[0], DType::Float32);
                                });
        std::vector<int32_t> ii{-3, 0, 16777216};
        CHECK(run1<float>(back, 3, ii) == std::vector<float>{-3.0f, 0.0f, 16777216.0f});
    }
    SUBCASE("float32 -> bool is != 0 (NaN is true); bool -> float32 and int32") {
        auto prog = elementwise(DType::Bool, {DType::Float32}, 4,
                                [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                    return p.cast(x[0], DType::Bool);
                                });
        std::vector<float> in{0.0f, -0.0f, 0.5f, std::numeric_limits<float>::quiet_NaN()};
        auto r = run1<uint8_t>(prog, 4, in); // bool is one byte in memory
        CHECK(r == std::vector<uint8_t>{0, 0, 1, 1});
        auto fb = elementwise(
            DType::Float32, {DType::Bool}, 3, [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                return p.alu(Op::Add, {p.cast(x[0], DType::Float32),
                                       p.cast(p.cast(x[0], DType::Int32), DType::Float32)});
            });
        std::vector<uint8_t> bs{0, 1, 2}; // any nonzero byte reads as true
        CHECK(run1<float>(fb, 3, bs) == std::vector<float>{0.0f, 2.0f, 2.0f});
    }
    SUBCASE("integer widths: sign and zero extension, truncation") {
        auto sx = elementwise(DType::Int32, {DType::Int8}, 2,
                              [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                  return p.cast(x[0], DType::Int32);
                              });
        std::vector<int8_t> i8{-5, 100};
        CHECK(run1<int32_t>(sx, 2, i8) == std::vector<int32_t>{-5, 100});
        auto zx = elementwise(DType::Int64, {DType::UInt8}, 2,
                              [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                  return p.cast(x[0], DType::Int64);
                              });
        std::vector<uint8_t> u8{250, 3};
        CHECK(run1<int64_t>(zx, 2, u8) == std::vector<int64_t>{250, 3});
        auto tr = elementwise(DType::Int8, {DType::Int32}, 2,
                              [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                  return p.cast(x[0], DType::Int8);
                              });
        std::vector<int32_t> i32{300, -129};
        CHECK(run1<int8_t>(tr, 2, i32) == std::vector<int8_t>{44, 127});
        auto u2f = elementwise(DType::Float64, {DType::UInt32}, 1,
                               [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                   return p.cast(x[0], DType::Float64);
                               });
        std::vector<uint32_t> big{4000000000u};
        CHECK(run1<double>(u2f, 1, big) == std::vector<double>{4000000000.0});
        auto f2u = elementwise(DType::UInt16, {DType::Float32}, 1,
                               [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                   return p.cast(x[0], DType::UInt16);
                               });
        std::vector<float> f{65000.9f};
        CHECK(run1<uint16_t>(f2u, 1, f) == std::vector<uint16_t>{65000});
    }
    SUBCASE("float32 <-> float64 <-> float16, int64 -> float64, bitcast") {
        auto prog = elementwise(
            DType::Float64, {DType::Float32, DType::Int64}, 2,
            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                return p.alu(Op::Add, {p.cast(x[0], DType::Float64), p.cast(x[1], DType::Float64)});
            });
        std::vector<float> f{0.1f, -2.0f};
        std::vector<int64_t> i{int64_t{1} << 40, -3};
        auto r = run1<double>(prog, 2, f, i);
        CHECK(r[0] == static_cast<double>(0.1f) + static_cast<double>(int64_t{1} << 40));
        CHECK(r[1] == -5.0);
        auto narrow = elementwise(
            DType::Float32, {DType::Float64}, 2,
            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                return p.cast(p.cast(p.cast(x[0], DType::Float32), DType::Float16), DType::Float32);
            });
        std::vector<double> d{0.1, 1.5};
        CHECK(run1<float>(narrow, 2, d) == std::vector<float>{0.0999755859375f, 1.5f});
        auto bits = elementwise(DType::Int32, {DType::Float32}, 1,
                                [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                    return p.add(UOp::make(Op::BitCast, DType::Int32, {x[0]}));
                                });
        std::vector<float> one{1.0f};
        CHECK(run1<int32_t>(bits, 1, one) == std::vector<int32_t>{0x3f800000});
    }
}

TEST_CASE("exp2, log2, sin, sqrt, recip, trunc, neg") {
    auto prog = [](Op op) {
        return elementwise(
            DType::Float32, {DType::Float32}, 20,
            [op](Prog& p, const std::vector<UOp>& x, const UOp&) { return p.alu(op, {x[0]}); });
    };
    std::vector<float> in(20);
    for (int i = 0; i < 20; ++i) in[i] = static_cast<float>(i) * 0.75f;
    in[0] = 3.0f;
    in[1] = 16.0f;
    auto e = run1<float>(prog(Op::Exp2), 20, in);
    auto l = run1<float>(prog(Op::Log2), 20, in);
    auto s = run1<float>(prog(Op::Sin), 20, in);
    auto q = run1<float>(prog(Op::Sqrt), 20, in);
    auto rc = run1<float>(prog(Op::Recip), 20, in);
    auto t = run1<float>(prog(Op::Trunc), 20, in);
    auto ng = run1<float>(prog(Op::Neg), 20, in);
    CHECK(e[0] == 8.0f);
    CHECK(l[1] == 4.0f);
    CHECK(q[1] == 4.0f);
    CHECK(rc[1] == 0.0625f);
    for (int i = 0; i < 20; ++i) {
        CAPTURE(i);
        CHECK(e[i] == doctest::Approx(std::exp2(in[i])).epsilon(1e-6));
        CHECK(l[i] == doctest::Approx(std::log2(in[i])).epsilon(1e-6));
        CHECK(s[i] == doctest::Approx(std::sin(in[i])).epsilon(1e-6));
        CHECK(q[i] == std::sqrt(in[i])); // IEEE: correctly rounded
        CHECK(rc[i] == 1.0f / in[i]);
        CHECK(t[i] == std::trunc(in[i]));
        CHECK(ng[i] == -in[i]);
    }
    auto d = elementwise(DType::Float64, {DType::Float64}, 2,
                         [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                             return p.alu(Op::Sqrt, {p.alu(Op::Exp2, {x[0]})});
                         });
    std::vector<double> din{4.0, 10.0};
    CHECK(run1<double>(d, 2, din) == std::vector<double>{4.0, 32.0});
}

TEST_CASE("MAX, WHERE, comparisons and MULACC") {
    auto fmax = elementwise(DType::Float32, {DType::Float32, DType::Float32}, 4,
                            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                return p.alu(Op::Max, {x[0], x[1]});
                            });
    std::vector<float> a{-1.0f, 2.0f, -3.5f, 0.0f}, b{-2.0f, 5.0f, -3.0f, -0.0f};
    auto fm = run1<float>(fmax, 4, a, b);
    CHECK(fm[0] == -1.0f);
    CHECK(fm[1] == 5.0f);
    CHECK(fm[2] == -3.0f);
    CHECK(fm[3] == 0.0f);
    auto imax = elementwise(DType::Int32, {DType::Int32, DType::Int32}, 3,
                            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                return p.alu(Op::Max, {x[0], x[1]});
                            });
    std::vector<int32_t> ia{-5, 7, -1}, ib{-6, 8, 1};
    CHECK(run1<int32_t>(imax, 3, ia, ib) == std::vector<int32_t>{-5, 8, 1});
    auto umax = elementwise(DType::UInt32, {DType::UInt32, DType::UInt32}, 1,
                            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                return p.alu(Op::Max, {x[0], x[1]});
                            });
    std::vector<uint32_t> ua{0xffffffffu}, ub{1u};
    CHECK(run1<uint32_t>(umax, 1, ua, ub) == std::vector<uint32_t>{0xffffffffu});

    // where(a < b, a, b) == min; where(a != b, 1, 0); where(a == b, ...)
    auto wmin =
        elementwise(DType::Float32, {DType::Float32, DType::Float32}, 4,
                    [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                        return p.alu(Op::Where, {p.alu(Op::CmpLt, {x[0], x[1]}), x[0], x[1]});
                    });
    CHECK(run1<float>(wmin, 4, a, b) == std::vector<float>{-2.0f, 2.0f, -3.5f, -0.0f});
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto cmps = elementwise(
        DType::Int32, {DType::Float32, DType::Float32}, 3,
        [](Prog& p, const std::vector<UOp>& x, const UOp&) {
            // 1 * (a < b) + 2 * (a != b) + 4 * (a == b)
            auto bit = [&](Op op, int64_t w) {
                return p.alu(Op::Where, {p.alu(op, {x[0], x[1]}), p.ci(DType::Int32, w),
                                         p.ci(DType::Int32, 0)});
            };
            return p.alu(Op::Add, {p.alu(Op::Add, {bit(Op::CmpLt, 1), bit(Op::CmpNe, 2)}),
                                   bit(Op::CmpEq, 4)});
        });
    std::vector<float> ca{1.0f, 2.0f, nan}, cb{2.0f, 2.0f, 1.0f};
    CHECK(run1<int32_t>(cmps, 3, ca, cb) == std::vector<int32_t>{3, 4, 2}); // NaN: only !=
    auto ult = elementwise(DType::Bool, {DType::UInt8, DType::UInt8}, 2,
                           [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                               return p.alu(Op::CmpLt, {x[0], x[1]});
                           });
    std::vector<uint8_t> u1{200, 1}, u2{100, 2};
    CHECK(run1<uint8_t>(ult, 2, u1, u2) == std::vector<uint8_t>{0, 1});

    auto mac = elementwise(DType::Float64, {DType::Float64, DType::Float64}, 2,
                           [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                               return p.alu(Op::MulAcc, {x[0], x[1], p.c(DType::Float64, 0.25)});
                           });
    std::vector<double> ma{1.5, -2.0}, mb{4.0, 3.0};
    CHECK(run1<double>(mac, 2, ma, mb) == std::vector<double>{6.25, -5.75});
    auto imac = elementwise(DType::Int64, {DType::Int64, DType::Int64}, 1,
                            [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                return p.alu(Op::MulAcc, {x[0], x[1], p.ci(DType::Int64, -1)});
                            });
    std::vector<int64_t> la{int64_t{1} << 33}, lb{3};
    CHECK(run1<int64_t>(imac, 1, la, lb) == std::vector<int64_t>{(int64_t{3} << 33) - 1});
}

TEST_CASE("DEFINE_VAR as a loop bound, int32 and index") {
    // out[i] = i * k for i < n; n and k come from the vars array in order of appearance.
    Prog p;
    UOp out = p.param(DType::Int32, 0, 16);
    UOp n = p.var("n", 1, 16);
    UOp k = p.var("k", -100, 100, DType::Int32);
    UOp r = p.range(n, 0);
    p.store(p.index(out, r), p.alu(Op::Mul, {p.cast(r, DType::Int32), k}));
    p.end(r);
    auto kern = compile_cpu_kernel("var_bound", p.ops);
    CHECK(kern->var_count() == 2);
    for (int64_t len : {5, 9, 16}) {
        std::vector<int32_t> res(16, -1);
        void* bufs[] = {res.data()};
        const int64_t vars[] = {len, -3};
        kern->run(bufs, vars);
        for (int64_t i = 0; i < 16; ++i)
            CHECK(res[i] == (i < len ? static_cast<int32_t>(i) * -3 : -1));
    }
}

TEST_CASE("the kernel cache: keyed by structure, not by UOp identity") {
    auto build = [](double c) {
        return elementwise(DType::Float32, {DType::Float32}, 77,
                           [c](Prog& p, const std::vector<UOp>& x, const UOp&) {
                               return p.alu(Op::Mul, {x[0], p.c(DType::Float32, c)});
                           });
    };
    const auto s0 = tempura::runtime::cpu_kernel_cache_stats();
    size_t live_before = 0;
    std::shared_ptr<const tempura::runtime::CompiledKernel> first;
    {
        auto prog = build(1234.5);
        live_before = prog.size();
        first = compile_cpu_kernel("scale", prog);
    } // the program's nodes die here: the next build makes fresh ones
    const auto s1 = tempura::runtime::cpu_kernel_cache_stats();
    CHECK(s1.misses == s0.misses + 1);
    CHECK(s1.hits == s0.hits);

    auto again = compile_cpu_kernel("scale", build(1234.5));
    const auto s2 = tempura::runtime::cpu_kernel_cache_stats();
    CHECK(s2.misses == s1.misses);
    CHECK(s2.hits == s1.hits + 1);
    CHECK(again.get() == first.get());
    CHECK(live_before > 0);

    auto renamed = compile_cpu_kernel("scale_again", build(1234.5));
    CHECK(renamed->name() == "scale_again");
    CHECK((renamed->entry() == first->entry()));
    CHECK(tempura::runtime::cpu_kernel_cache_stats().hits == s2.hits + 1);

    auto other = compile_cpu_kernel("scale", build(1234.25));
    const auto s3 = tempura::runtime::cpu_kernel_cache_stats();
    CHECK(s3.misses == s2.misses + 1);
    CHECK(other->symbol() != first->symbol());
    std::vector<float> in(77, 2.0f), out(77);
    void* bufs[] = {in.data(), out.data()};
    other->run(bufs, nullptr);
    CHECK(out[76] == 2468.5f);
}

TEST_CASE("the host CPU and its features are used") {
    const std::string cpu = tempura::runtime::host_cpu_name();
    const std::string features = tempura::runtime::host_cpu_features();
    MESSAGE("host CPU: " << cpu);
    CHECK(!cpu.empty());
    CHECK(cpu != "generic");
    CHECK(!features.empty());
    auto prog = elementwise(
        DType::Float32, {DType::Float32, DType::Float32}, 4096,
        [](Prog& p, const std::vector<UOp>& x, const UOp&) {
            return p.alu(Op::Add, {p.alu(Op::Mul, {x[0], x[1]}), p.c(DType::Float32, 0.125)});
        });
    auto k = compile_cpu_kernel("host_features", prog);
    const std::string& ir = k->source();
    CHECK(ir.find("\"target-cpu\"=\"" + cpu + "\"") != std::string::npos);
    CHECK(ir.find("\"target-features\"=\"" + features + "\"") != std::string::npos);
    // The loop vectorizer ran with the host's TTI: the loop works on vectors of floats, as wide
    // as 512 bits where the host has AVX-512. The multiply and the add carry no `contract`: each
    // rounds once, as the reference interpreter's ops do (a MULACC is the one fused op).
    CHECK(ir.find(" x float>") != std::string::npos);
    CHECK(ir.find("fmul <") != std::string::npos);
    CHECK(ir.find("contract") == std::string::npos);
    if (features.find("+avx512f") != std::string::npos) {
        MESSAGE("AVX-512 host: expecting <16 x float>");
        CHECK(ir.find("<16 x float>") != std::string::npos);
    }
}

TEST_CASE("unsupported ops, dtypes and broken programs throw tempura::Error") {
    SUBCASE("an op that is not part of the linearized kernel") {
        Prog p;
        p.add(UOp::make(Op::Contiguous, DType::Int32, {p.ci(DType::Int32, 4)}));
        auto msg = error_of([&] { compile_cpu_kernel("bad_op", p.ops); });
        CHECK(msg.find("[cpu]") != std::string::npos);
        CHECK(msg.find("CONTIGUOUS") != std::string::npos);
        CHECK(msg.find("int32") != std::string::npos);
    }
    SUBCASE("a vector dtype") {
        Prog p;
        UOp out = p.param(DType::Float32.vec(4), 0, 4);
        p.store(p.index(out, p.idx(0)), p.c(DType::Float32.vec(4), 1.0));
        auto msg = error_of([&] { compile_cpu_kernel("bad_dtype", p.ops); });
        CHECK(msg.find("float32x4") != std::string::npos);
    }
    SUBCASE("an op on a dtype it is not defined for") {
        auto prog = elementwise(DType::Float32, {DType::Float32}, 4,
                                [](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                    return p.alu(Op::Xor, {x[0], x[0]});
                                });
        auto msg = error_of([&] { compile_cpu_kernel("bad_xor", prog); });
        CHECK(msg.find("XOR") != std::string::npos);
        CHECK(msg.find("float32") != std::string::npos);
    }
    SUBCASE("operands of different dtypes") {
        Prog p;
        UOp out = p.param(DType::Int32, 0, 1);
        UOp bad =
            p.add(UOp::make(Op::Add, DType::Int32, {p.ci(DType::Int32, 1), p.ci(DType::Int64, 2)}));
        p.store(p.index(out, p.idx(0)), bad);
        auto msg = error_of([&] { compile_cpu_kernel("bad_mix", p.ops); });
        CHECK(msg.find("ADD") != std::string::npos);
        CHECK(msg.find("int64") != std::string::npos);
    }
    SUBCASE("a source after its user") {
        UOp c = UOp::constant(DType::Int32, 3);
        std::vector<UOp> prog{UOp::alu(Op::Add, {c, c}), c};
        auto msg = error_of([&] { compile_cpu_kernel("bad_order", prog); });
        CHECK(msg.find("does not precede") != std::string::npos);
    }
    SUBCASE("an unclosed RANGE, an END out of order") {
        Prog p;
        p.range(p.idx(4), 0);
        CHECK(error_of([&] { compile_cpu_kernel("open_range", p.ops); }).find("never closed") !=
              std::string::npos);
        Prog q;
        UOp r0 = q.range(q.idx(4), 0);
        q.range(q.idx(4), 1);
        q.end(r0);
        CHECK(error_of([&] { compile_cpu_kernel("bad_end", q.ops); }).find("innermost") !=
              std::string::npos);
    }
    SUBCASE("a value used outside the block that defines it") {
        Prog p;
        UOp out = p.param(DType::Index, 0, 1);
        UOp r = p.range(p.idx(4), 0);
        UOp twice = p.alu(Op::Mul, {r, p.idx(2)});
        p.end(r);
        p.store(p.index(out, p.idx(0)), twice);
        auto msg = error_of([&] { compile_cpu_kernel("bad_scope", p.ops); });
        CHECK(msg.find("invalid LLVM IR") != std::string::npos);
    }
}

TEST_CASE("every ALU op on every scalar dtype compiles and runs, or throws tempura::Error") {
    // Never a crash: LLVM aborts on IR it cannot select, so the renderer must refuse such IR
    // itself. Straight-line kernels: out[0] = op(in[0], in[1], in[2]).
    const std::vector<DType> dtypes{DType::Bool,    DType::Int8,   DType::Int16,   DType::Int32,
                                    DType::Int64,   DType::UInt8,  DType::UInt16,  DType::UInt32,
                                    DType::UInt64,  DType::Index,  DType::Float16, DType::BFloat16,
                                    DType::Float32, DType::Float64};
    alignas(16) unsigned char in[3][16], out[16];
    std::memset(in, 1, sizeof in);
    size_t compiled = 0, refused = 0;
    for (size_t o = 0; o < tempura::kNumOps; ++o) {
        const Op op = static_cast<Op>(o);
        if (!tempura::is_alu(op)) continue;
        const int arity = tempura::op_info(op).arity;
        for (DType t : dtypes) {
            Prog p;
            std::vector<UOp> xs;
            for (int k = 0; k < arity; ++k)
                xs.push_back(p.load(p.index(p.param(t, k, 1), p.idx(0))));
            UOp y;
            if (op == Op::Where) {
                xs[0] = p.cast(xs[0], DType::Bool);
                y = p.alu(op, xs);
            } else if (op == Op::Cast || op == Op::BitCast) {
                y = p.add(UOp::make(op, t == DType::Float32 ? DType::Int32 : DType::Float32, xs));
            } else {
                y = p.add(UOp::make(op, tempura::is_comparison(op) ? DType::Bool : t, xs));
            }
            p.store(p.index(p.param(y.dtype(), arity, 1), p.idx(0)), y);
            CAPTURE(tempura::op_name(op));
            CAPTURE(t.name());
            try {
                auto k = compile_cpu_kernel("sweep", p.ops);
                void* bufs[] = {in[0], in[1], in[2], out};
                std::swap(bufs[arity], bufs[3]);
                k->run(bufs, nullptr);
                ++compiled;
            } catch (const tempura::Error& e) {
                const std::string msg = e.what();
                if (std::getenv("TEMPURA_TEST_VERBOSE") != nullptr) MESSAGE(msg);
                CHECK(msg.find(std::string(tempura::op_name(op))) != std::string::npos);
                ++refused;
            }
        }
    }
    MESSAGE("compiled " << compiled << ", refused " << refused);
    CHECK(compiled > 250);
}

TEST_CASE("casts between every pair of scalar dtypes compile and run") {
    const std::vector<DType> dtypes{DType::Bool,    DType::Int8,   DType::Int16,   DType::Int32,
                                    DType::Int64,   DType::UInt8,  DType::UInt16,  DType::UInt32,
                                    DType::UInt64,  DType::Index,  DType::Float16, DType::BFloat16,
                                    DType::Float32, DType::Float64};
    for (DType from : dtypes) {
        // One kernel per source dtype: out_k[0] = cast(in[0]) for every target dtype k.
        Prog p;
        UOp x = p.load(p.index(p.param(from, 0, 1), p.idx(0)));
        for (size_t k = 0; k < dtypes.size(); ++k)
            p.store(p.index(p.param(dtypes[k], static_cast<int64_t>(k) + 1, 1), p.idx(0)),
                    p.cast(x, dtypes[k]));
        CAPTURE(from.name());
        auto kern = compile_cpu_kernel("casts", p.ops);
        // 3 in every source dtype (bool: true).
        alignas(16) unsigned char in[16] = {};
        switch (from.scalar) {
        case tempura::Scalar::Float16: in[1] = 0x42; break;                // 3.0 = 0x4200
        case tempura::Scalar::BFloat16: in[1] = 0x40, in[0] = 0x40; break; // 3.0 = 0x4040
        case tempura::Scalar::Float32: {
            const float f = 3.0f;
            std::memcpy(in, &f, sizeof f);
            break;
        }
        case tempura::Scalar::Float64: {
            const double d = 3.0;
            std::memcpy(in, &d, sizeof d);
            break;
        }
        case tempura::Scalar::Bool: in[0] = 1; break;
        default: in[0] = 3; break;
        }
        alignas(16) unsigned char outs[14][16] = {};
        std::vector<void*> bufs{in};
        for (auto& o : outs) bufs.push_back(o);
        kern->run(bufs.data(), nullptr);
        const double want = from.is_bool() ? 1.0 : 3.0;
        for (size_t k = 0; k < dtypes.size(); ++k) {
            CAPTURE(dtypes[k].name());
            const auto s = dtypes[k].scalar;
            double got = 0;
            if (s == tempura::Scalar::Float32)
                got = *reinterpret_cast<float*>(outs[k]);
            else if (s == tempura::Scalar::Float64)
                got = *reinterpret_cast<double*>(outs[k]);
            else if (s == tempura::Scalar::Float16)
                got = outs[k][1] == 0x42 ? 3 : outs[k][1] == 0x3c ? 1 : -1;
            else if (s == tempura::Scalar::BFloat16)
                got = outs[k][1] == 0x40 ? 3 : outs[k][1] == 0x3f ? 1 : -1;
            else
                got = outs[k][0]; // little endian, small value
            CHECK(got == (dtypes[k].is_bool() ? 1.0 : want));
        }
    }
}

TEST_CASE("compiling from several threads at once") {
    // Each thread compiles a program of its own and one program all threads share, then runs
    // both: the JIT and the cache are process-wide.
    constexpr int kThreads = 4;
    std::vector<std::thread> threads;
    std::vector<int> ok(kThreads, 0);
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([t, &ok] {
            for (double c : {1000.0 + t, 77.0}) {
                auto prog = elementwise(DType::Float64, {DType::Float64}, 33,
                                        [c](Prog& p, const std::vector<UOp>& x, const UOp&) {
                                            return p.alu(Op::Add, {x[0], p.c(DType::Float64, c)});
                                        });
                auto k = compile_cpu_kernel("threads", prog);
                std::vector<double> in(33, 1.0), out(33);
                void* bufs[] = {in.data(), out.data()};
                k->run(bufs, nullptr);
                ok[t] += out[32] == 1.0 + c ? 1 : 0;
            }
        });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) CHECK(ok[t] == 2);
}

namespace {

// Shifts by the width or more have one meaning everywhere (tempura/ir/scalar.hpp): 0, or the
// sign for an arithmetic right shift; a negative amount counts as a huge one. The compiled
// kernel, constant folding (exec_int_alu) and the reference interpreter agree.
TEST_CASE("shifts by the bit width or more: one meaning in the kernel and in folding") {
    std::vector<int32_t> a, s;
    for (int32_t x : {1, -1, 12345, -12345, INT32_MIN, INT32_MAX})
        for (int32_t k : {0, 1, 5, 31, 32, 33, 63, 64, 1000, -1, -32, INT32_MIN}) {
            a.push_back(x);
            s.push_back(k);
        }
    const auto n = static_cast<int64_t>(a.size());
    for (Op op : {Op::Shl, Op::Shr}) {
        for (DType dt : {DType::Int32, DType::UInt32}) {
            CAPTURE(op_name(op));
            CAPTURE(dt.name());
            auto prog =
                elementwise(dt, {dt, dt}, n, [&](Prog& p, const std::vector<UOp>& x, const UOp&) {
                    return p.alu(op, {x[0], x[1]});
                });
            const std::vector<int32_t> got = run1<int32_t>(prog, a.size(), a, s);
            for (size_t i = 0; i < a.size(); ++i) {
                CAPTURE(a[i]);
                CAPTURE(s[i]);
                const int64_t v[2] = {
                    dt == DType::UInt32 ? int64_t{static_cast<uint32_t>(a[i])} : int64_t{a[i]},
                    dt == DType::UInt32 ? int64_t{static_cast<uint32_t>(s[i])} : int64_t{s[i]}};
                const int64_t want = *tempura::exec_int_alu(op, dt, v, 2);
                CHECK(static_cast<int64_t>(dt == DType::UInt32
                                               ? int64_t{static_cast<uint32_t>(got[i])}
                                               : int64_t{got[i]}) == want);
                // The definition itself, spelled out.
                const uint64_t amount = static_cast<uint64_t>(v[1]);
                if (amount >= 32) {
                    const int64_t fill = op == Op::Shr && dt == DType::Int32 && a[i] < 0 ? -1 : 0;
                    CHECK(want == fill);
                }
            }
        }
    }
}

} // namespace
