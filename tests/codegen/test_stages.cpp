// The codegen stages on hand-built kernel ASTs: split and simplify ranges, gated loads, vector
// folds.
#include <doctest/doctest.h>

#include <tempura/codegen/rules.hpp>
#include <tempura/codegen/stages.hpp>
#include <tempura/rewrite/graph_rewrite.hpp>

namespace {

using namespace tempura;

UOp range(int64_t n, int64_t id) {
    return UOp::make(Op::Range, DType::Index, {UOp::index(n)}, RangeArg{id, AxisType::Loop});
}

UOp param(int64_t slot, int64_t numel) {
    return UOp::make(Op::Param, DType::Float32.ptr(), {}, std::vector<int64_t>{slot, numel});
}

// SINK(END(STORE(out[store_idx], in[load_idx]), ranges...))
UOp copy_kernel(const UOp& store_idx, const UOp& load_idx, std::vector<UOp> ranges) {
    const UOp out = param(0, 4096), in = param(1, 4096);
    const UOp ld =
        UOp::make(Op::Load, DType::Float32, {UOp::make(Op::Index, in.dtype(), {in, load_idx})});
    const UOp st = UOp::make(Op::Store, DType::Void,
                             {UOp::make(Op::Index, out.dtype(), {out, store_idx}), ld});
    std::vector<UOp> srcs{st};
    srcs.insert(srcs.end(), ranges.begin(), ranges.end());
    return UOp::sink({UOp::make(Op::End, DType::Void, srcs)});
}

size_t count(const UOp& ast, Op op) {
    size_t n = 0;
    for (const UOp& u : ast.toposort()) n += u.op() == op;
    return n;
}

std::vector<int64_t> end_sizes(const UOp& ast) {
    std::vector<int64_t> s;
    for (const UOp& u : ast.toposort())
        if (u.op() == Op::End)
            for (size_t i = 1; i < u.srcs().size(); ++i) s.push_back(u.src(i).src(0).const_value());
    return s;
}

} // namespace

TEST_CASE("split ranges: RANGE(12) % 4 becomes two loops and the divmod folds") {
    const UOp r = range(12, 0);
    // A transpose of a [3, 4] view: out[r] = in[(r % 4) * 3 + r / 4].
    const UOp ast = copy_kernel(r, (r % 4) * 3 + r / 4, {r});
    CHECK(count(ast, Op::Mod) == 1);
    const UOp split = codegen::split_ranges(ast);
    CHECK(count(split, Op::Mod) == 0);
    CHECK(count(split, Op::Idiv) == 0);
    CHECK(end_sizes(split) == std::vector<int64_t>{3, 4});
    // A modulo that does not divide the range stays.
    const UOp q = range(10, 0);
    const UOp kept = codegen::split_ranges(copy_kernel(q, q % 4, {q}));
    CHECK(count(kept, Op::Mod) == 1);
    CHECK(end_sizes(kept) == std::vector<int64_t>{10});
}

TEST_CASE("simplify ranges: adjacent contiguous ranges merge, a merge needing divmod does not") {
    const UOp i = range(64, 0), j = range(32, 1);
    // out[i*32 + j] = in[i*32 + j]: one range of 2048.
    const UOp merged = codegen::simplify_ranges(copy_kernel(i * 32 + j, i * 32 + j, {i, j}));
    CHECK(end_sizes(merged) == std::vector<int64_t>{2048});
    CHECK(count(merged, Op::Idiv) == 0);
    CHECK(count(merged, Op::Mod) == 0);
    // out[i*32 + j] = in[j*64 + i] (a transpose): merging would need r / 32 and r % 32.
    const UOp kept = codegen::simplify_ranges(copy_kernel(i * 32 + j, j * 64 + i, {i, j}));
    CHECK(end_sizes(kept) == std::vector<int64_t>{64, 32});
}

namespace {
UOp rewrite(const UOp& u, const pattern::RuleTable& t) {
    RewriteOptions o;
    o.bottom_up = true;
    return graph_rewrite(u, t, {}, o);
}
UOp load_at(const UOp& p, const UOp& i) {
    return UOp::make(Op::Load, DType::Float32, {UOp::make(Op::Index, p.dtype(), {p, i})});
}
} // namespace

TEST_CASE("gated loads: WHERE of a load under an index-only gate becomes a gated load") {
    const UOp in = param(1, 64), other = param(2, 64);
    const UOp r = range(64, 0), zero = UOp::constant_f(DType::Float32, 0.0);
    const UOp g = r < UOp::index(32);
    const UOp ld = load_at(in, r);
    const UOp out = rewrite(where(g, ld, zero), codegen::gated_loads());
    REQUIRE(out.op() == Op::Load);
    REQUIRE(out.srcs().size() == 3);
    CHECK(out.src(0).same(ld.src(0)));
    CHECK(out.src(1).same(g));
    CHECK(out.src(2).same(zero));
    // Not when the gate reads memory, when it uses an UPCAST range (a per-lane gate would make
    // the vector load a gather), or when the load is already gated.
    const UOp data_gate = load_at(other, r) < zero;
    const UOp w1 = where(data_gate, ld, zero);
    CHECK(rewrite(w1, codegen::gated_loads()).same(w1));
    const UOp up =
        UOp::make(Op::Range, DType::Index, {UOp::index(4)}, RangeArg{1, AxisType::Upcast});
    const UOp w2 = where(up < UOp::index(2), load_at(in, r * UOp::index(4) + up), zero);
    CHECK(rewrite(w2, codegen::gated_loads()).same(w2));
    const UOp w3 = where(g, out, zero);
    CHECK(rewrite(w3, codegen::gated_loads()).same(w3));
}

TEST_CASE("gated loads: the compiled kernel reads nothing where the gate is false") {
    // out[i] = i < 32 ? in[i] : 0 over 64 elements with `in` only 32 long: without the gate the
    // load would be out of bounds for i >= 32 (ASan would see it).
    const UOp out = param(0, 64), in = param(1, 32);
    const UOp r = range(64, 0), zero = UOp::constant_f(DType::Float32, 0.0);
    const UOp v = where(r < UOp::index(32), load_at(in, r), zero);
    const UOp st =
        UOp::make(Op::Store, DType::Void, {UOp::make(Op::Index, out.dtype(), {out, r}), v});
    const UOp ast = UOp::sink({UOp::make(Op::End, DType::Void, {st, r})});
    const std::vector<codegen::Opt> none;
    const auto low = codegen::lower_kernel_opt("gated", ast, codegen::DeviceLimits{}, &none);
    size_t gated = 0, wheres = 0;
    for (const UOp& u : low.program) {
        gated += u.op() == Op::Load && u.srcs().size() == 3;
        wheres += u.op() == Op::Where;
    }
    CHECK(gated == 1);
    CHECK(wheres == 0);
}

TEST_CASE("vector folds: GEP and VECTORIZE cancel") {
    const UOp a = UOp::variable("a", 0, 9), b = UOp::variable("b", 0, 9),
              c = UOp::variable("c", 0, 9);
    const DType v3 = DType::Index.vec(3);
    const UOp vec = UOp::make(Op::Vectorize, v3, {a, b, c});
    auto gep = [](const UOp& x, std::vector<int64_t> lanes) {
        const DType dt = x.dtype().vec(static_cast<uint16_t>(lanes.size()));
        return UOp::make(Op::Gep, dt, {x}, std::move(lanes));
    };
    CHECK(rewrite(gep(vec, {1}), codegen::vector_folds()).same(b));
    const UOp two = rewrite(gep(vec, {2, 0}), codegen::vector_folds());
    REQUIRE(two.op() == Op::Vectorize);
    CHECK(two.src(0).same(c));
    CHECK(two.src(1).same(a));
    // A vector rebuilt from its own lanes in order, or every lane of it, is the vector.
    const UOp x = UOp::make(Op::Vectorize, v3, {a + 1, b + 1, c + 1});
    const UOp y = x * UOp::make(Op::Vectorize, v3, {b, b, b});
    CHECK(rewrite(UOp::make(Op::Vectorize, v3, {gep(y, {0}), gep(y, {1}), gep(y, {2})}),
                  codegen::vector_folds())
              .same(y));
    CHECK(rewrite(gep(y, {0, 1, 2}), codegen::vector_folds()).same(y));
    // Out of order: stays.
    const UOp swapped = UOp::make(Op::Vectorize, v3, {gep(y, {1}), gep(y, {0}), gep(y, {2})});
    CHECK(rewrite(swapped, codegen::vector_folds()).same(swapped));
}
