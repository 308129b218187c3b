// The range stages before opts: split ranges and simplify ranges, on hand-built kernel ASTs.
#include <doctest/doctest.h>

#include <tempura/codegen/stages.hpp>

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
