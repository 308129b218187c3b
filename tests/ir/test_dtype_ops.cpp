// Unit tests of the IR's static facts: DType (widths, ranges, kinds, names, wrap_to) and the
// constexpr op table (names, arity, categories, flags, range starts).
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <string_view>

#include <tempura/tempura.hpp>

namespace {

using tempura::AddrSpace;
using tempura::DType;
using tempura::Op;
using tempura::OpCategory;
using tempura::Scalar;

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// ---- the facts hold at compile time
// --------------------------------------------------------------
static_assert(DType::Float32.bits() == 32);
static_assert(DType::Float32.itemsize() == 4);
static_assert(DType::Bool.itemsize() == 1);
static_assert(DType::Int8.min() == -128 && DType::Int8.max() == 127);
static_assert(DType::Float32.vec(4).count == 4);
static_assert(DType::Index.is_int() && !DType::Bool.is_int());
static_assert(tempura::wrap_to(DType::Int8, 128) == -128);
static_assert(tempura::wrap_to(DType::UInt8, -1) == 255);
static_assert(tempura::op_info(Op::Add).arity == 2);
static_assert(tempura::op_info(Op::Sink).arity == tempura::kVariadic);
static_assert(tempura::is_commutative(Op::Add) && !tempura::is_commutative(Op::Sub));
static_assert(tempura::op_info(Op::Store).range_start == 2);
static_assert(tempura::kNumOps == static_cast<size_t>(Op::Detach) + 1);

// Every Op enumerator, by walking the table (the enum is dense from 0).
constexpr Op op_at(size_t i) { return static_cast<Op>(i); }

} // namespace

// ---- DType
// ----------------------------------------------------------------------------------------

TEST_CASE("DType: bits and itemsize of every scalar") {
    struct Row {
        DType dt;
        int bits;
        int itemsize;
    };
    const Row rows[] = {
        {DType::Void, 0, 0},     {DType::Bool, 1, 1},     {DType::Int8, 8, 1},
        {DType::Int16, 16, 2},   {DType::Int32, 32, 4},   {DType::Int64, 64, 8},
        {DType::UInt8, 8, 1},    {DType::UInt16, 16, 2},  {DType::UInt32, 32, 4},
        {DType::UInt64, 64, 8},  {DType::Float16, 16, 2}, {DType::BFloat16, 16, 2},
        {DType::Float32, 32, 4}, {DType::Float64, 64, 8}, {DType::Index, 64, 8},
    };
    for (const Row& r : rows) {
        CAPTURE(r.dt.name());
        CHECK(r.dt.bits() == r.bits);
        CHECK(r.dt.itemsize() == r.itemsize);
    }
    // A vector's bits and itemsize are those of its scalar (the width is `count`).
    CHECK(DType::Float32.vec(4).bits() == 32);
    CHECK(DType::Float32.vec(4).itemsize() == 4);
}

TEST_CASE("DType: min and max of the integral dtypes") {
    CHECK(DType::Bool.min() == 0);
    CHECK(DType::Bool.max() == 1);
    CHECK(DType::Int8.min() == -128);
    CHECK(DType::Int8.max() == 127);
    CHECK(DType::Int16.min() == -32768);
    CHECK(DType::Int16.max() == 32767);
    CHECK(DType::Int32.min() == -2147483648LL);
    CHECK(DType::Int32.max() == 2147483647LL);
    CHECK(DType::Int64.min() == kI64Min);
    CHECK(DType::Int64.max() == kI64Max);
    CHECK(DType::UInt8.min() == 0);
    CHECK(DType::UInt8.max() == 255);
    CHECK(DType::UInt16.min() == 0);
    CHECK(DType::UInt16.max() == 65535);
    CHECK(DType::UInt32.min() == 0);
    CHECK(DType::UInt32.max() == 4294967295LL);
    // uint64's top half is not representable as int64: clamped.
    CHECK(DType::UInt64.min() == 0);
    CHECK(DType::UInt64.max() == kI64Max);
    CHECK(DType::Index.min() == kI64Min);
    CHECK(DType::Index.max() == kI64Max);
}

TEST_CASE("DType: kind predicates") {
    // is_int: the C integers and Index; not bool, not floats, not pointers.
    for (DType d : {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8,
                    DType::UInt16, DType::UInt32, DType::UInt64, DType::Index}) {
        CAPTURE(d.name());
        CHECK(d.is_int());
        CHECK(d.is_integral());
        CHECK_FALSE(d.is_float());
        CHECK_FALSE(d.is_bool());
    }
    for (DType d : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) {
        CAPTURE(d.name());
        CHECK(d.is_float());
        CHECK_FALSE(d.is_int());
        CHECK_FALSE(d.is_integral());
        CHECK_FALSE(d.is_bool());
        CHECK_FALSE(d.is_unsigned());
    }
    CHECK(DType::Bool.is_bool());
    CHECK_FALSE(DType::Bool.is_int());
    CHECK(DType::Bool.is_integral());
    CHECK_FALSE(DType::Bool.is_float());
    CHECK_FALSE(DType::Void.is_int());
    CHECK_FALSE(DType::Void.is_float());
    CHECK_FALSE(DType::Void.is_bool());

    CHECK(DType::UInt8.is_unsigned());
    CHECK(DType::UInt64.is_unsigned());
    CHECK_FALSE(DType::Int8.is_unsigned());
    CHECK_FALSE(DType::Index.is_unsigned());

    // A pointer is none of these, whatever it points to.
    CHECK_FALSE(DType::Float32.ptr().is_float());
    CHECK_FALSE(DType::Int32.ptr().is_int());
    CHECK_FALSE(DType::Bool.ptr().is_bool());
    CHECK_FALSE(DType::UInt8.ptr().is_unsigned());
    // A vector keeps its scalar's kind.
    CHECK(DType::Float32.vec(4).is_float());
    CHECK(DType::Int32.vec(2).is_int());
}

TEST_CASE("DType: vec, ptr, base and scalar_type") {
    const DType v4 = DType::Float32.vec(4);
    CHECK(v4.scalar == Scalar::Float32);
    CHECK(v4.count == 4);
    CHECK_FALSE(v4.is_ptr);
    CHECK(v4.scalar_type() == DType::Float32);
    CHECK_FALSE(v4 == DType::Float32);

    const DType p = DType::Float32.ptr();
    CHECK(p.is_ptr);
    CHECK(p.addrspace == AddrSpace::Global);
    CHECK(p.count == 1);
    CHECK(p.base() == DType::Float32);
    CHECK_FALSE(p == DType::Float32);

    const DType lp = DType::Int32.vec(8).ptr(AddrSpace::Local);
    CHECK(lp.is_ptr);
    CHECK(lp.addrspace == AddrSpace::Local);
    CHECK(lp.count == 8);
    CHECK(lp.base() == DType::Int32.vec(8));
    CHECK(lp.scalar_type() == DType::Int32);
    // vec() of a pointer keeps the pointer.
    CHECK(DType::Float32.ptr().vec(2) == DType::Float32.vec(2).ptr());
    // Address spaces distinguish pointers.
    CHECK_FALSE(DType::Float32.ptr(AddrSpace::Global) == DType::Float32.ptr(AddrSpace::Reg));
}

TEST_CASE("DType::name") {
    CHECK(DType::Void.name() == "void");
    CHECK(DType::Bool.name() == "bool");
    CHECK(DType::Int8.name() == "int8");
    CHECK(DType::Int16.name() == "int16");
    CHECK(DType::Int32.name() == "int32");
    CHECK(DType::Int64.name() == "int64");
    CHECK(DType::UInt8.name() == "uint8");
    CHECK(DType::UInt16.name() == "uint16");
    CHECK(DType::UInt32.name() == "uint32");
    CHECK(DType::UInt64.name() == "uint64");
    CHECK(DType::Float16.name() == "float16");
    CHECK(DType::BFloat16.name() == "bfloat16");
    CHECK(DType::Float32.name() == "float32");
    CHECK(DType::Float64.name() == "float64");
    CHECK(DType::Index.name() == "index");
    CHECK(DType::Float32.vec(4).name() == "float32x4");
    CHECK(DType::Bool.vec(16).name() == "boolx16");
    CHECK(DType::Float32.ptr().name() == "float32*[global]");
    CHECK(DType::Float32.ptr(AddrSpace::Local).name() == "float32*[local]");
    CHECK(DType::Int8.vec(4).ptr(AddrSpace::Reg).name() == "int8x4*[reg]");
}

TEST_CASE("wrap_to: two's complement wrapping to the dtype's width") {
    using tempura::wrap_to;
    CHECK(wrap_to(DType::Int8, 127) == 127);
    CHECK(wrap_to(DType::Int8, 128) == -128);
    CHECK(wrap_to(DType::Int8, 255) == -1);
    CHECK(wrap_to(DType::Int8, 256) == 0);
    CHECK(wrap_to(DType::Int8, -129) == 127);
    CHECK(wrap_to(DType::UInt8, -1) == 255);
    CHECK(wrap_to(DType::UInt8, 256) == 0);
    CHECK(wrap_to(DType::UInt8, 300) == 44);
    CHECK(wrap_to(DType::Int16, 32768) == -32768);
    CHECK(wrap_to(DType::Int16, -32769) == 32767);
    CHECK(wrap_to(DType::UInt16, 65537) == 1);
    CHECK(wrap_to(DType::Int32, 2147483648LL) == -2147483648LL);
    CHECK(wrap_to(DType::Int32, -2147483649LL) == 2147483647LL);
    CHECK(wrap_to(DType::UInt32, -1) == 4294967295LL);
    CHECK(wrap_to(DType::UInt32, 4294967296LL) == 0);
    // 64-bit dtypes are already two's complement int64: unchanged.
    CHECK(wrap_to(DType::Int64, kI64Min) == kI64Min);
    CHECK(wrap_to(DType::Index, kI64Max) == kI64Max);
    CHECK(wrap_to(DType::UInt64, -1) == -1);
    // Bool: any non-zero value is true.
    CHECK(wrap_to(DType::Bool, 0) == 0);
    CHECK(wrap_to(DType::Bool, 1) == 1);
    CHECK(wrap_to(DType::Bool, 5) == 1);
    CHECK(wrap_to(DType::Bool, -1) == 1);
    CHECK(wrap_to(DType::Bool, 256) == 1); // not truncated to the low bit
}

// ---- the op table
// ---------------------------------------------------------------------------------

TEST_CASE("op table: every op has a non-empty, unique, upper-case name") {
    std::set<std::string_view> names;
    for (size_t i = 0; i < tempura::kNumOps; ++i) {
        const Op op = op_at(i);
        std::string_view n = tempura::op_name(op);
        CAPTURE(i);
        CAPTURE(std::string(n));
        CHECK_FALSE(n.empty());
        CHECK(names.insert(n).second);
        for (char ch : n)
            CHECK(((ch >= 'A' && ch <= 'Z') || ch == '_' || (ch >= '0' && ch <= '9')));
        CHECK(&tempura::op_info(op) == &tempura::kOpTable[i]);
    }
    CHECK(names.size() == tempura::kNumOps);
    CHECK(tempura::op_name(Op::Add) == "ADD");
    CHECK(tempura::op_name(Op::Idiv) == "IDIV");
    CHECK(tempura::op_name(Op::Recip) == "RECIPROCAL");
    CHECK(tempura::op_name(Op::DefineVar) == "DEFINE_VAR");
    CHECK(tempura::op_name(Op::ReduceAxis) == "REDUCE_AXIS");
    CHECK(tempura::op_name(Op::Contiguous) == "CONTIGUOUS");
}

TEST_CASE("op table: arity") {
    using tempura::arity_ok;
    using tempura::kVariadic;
    using tempura::op_info;
    CHECK(op_info(Op::Add).arity == 2);
    CHECK(op_info(Op::Add).min_arity == 2);
    CHECK(op_info(Op::Neg).arity == 1);
    CHECK(op_info(Op::Where).arity == 3);
    CHECK(op_info(Op::MulAcc).arity == 3);
    CHECK(op_info(Op::Const).arity == 0);
    CHECK(op_info(Op::DefineVar).arity == 0);
    CHECK(op_info(Op::Sink).arity == kVariadic);
    CHECK(op_info(Op::Sink).min_arity == 0);
    CHECK(op_info(Op::After).arity == kVariadic);
    CHECK(op_info(Op::After).min_arity == 1);
    CHECK(op_info(Op::Index).min_arity == 2);
    CHECK(op_info(Op::Store).min_arity == 2);

    CHECK(arity_ok(Op::Add, 2));
    CHECK_FALSE(arity_ok(Op::Add, 1));
    CHECK_FALSE(arity_ok(Op::Add, 3));
    CHECK(arity_ok(Op::Where, 3));
    CHECK_FALSE(arity_ok(Op::Where, 2));
    CHECK(arity_ok(Op::Sink, 0));
    CHECK(arity_ok(Op::Sink, 1000));
    CHECK_FALSE(arity_ok(Op::After, 0));
    CHECK(arity_ok(Op::After, 1));
    CHECK(arity_ok(Op::Const, 0));
    CHECK_FALSE(arity_ok(Op::Const, 1));

    // Consistency of the table: a fixed arity is its own minimum; a variadic minimum is >= 0.
    for (size_t i = 0; i < tempura::kNumOps; ++i) {
        const auto& info = tempura::kOpTable[i];
        CAPTURE(std::string(info.name));
        if (info.arity == kVariadic)
            CHECK(info.min_arity >= 0);
        else
            CHECK(info.min_arity == info.arity);
    }
}

TEST_CASE("op table: commutative and associative flags") {
    using tempura::is_associative;
    using tempura::is_commutative;
    for (Op op : {Op::Add, Op::Mul, Op::Max, Op::And, Op::Or, Op::Xor, Op::CmpNe, Op::CmpEq}) {
        CAPTURE(std::string(tempura::op_name(op)));
        CHECK(is_commutative(op));
    }
    for (Op op : {Op::Sub, Op::Idiv, Op::Fdiv, Op::Mod, Op::Shl, Op::Shr, Op::CmpLt, Op::Pow,
                  Op::Where, Op::Neg, Op::Const, Op::Sink}) {
        CAPTURE(std::string(tempura::op_name(op)));
        CHECK_FALSE(is_commutative(op));
    }
    CHECK(is_associative(Op::Add));
    CHECK(is_associative(Op::Mul));
    CHECK_FALSE(is_associative(Op::Sub));
    CHECK_FALSE(is_associative(Op::CmpEq)); // commutative, but (a == b) == c is not a == (b == c)
    // Only binary ops are commutative.
    for (size_t i = 0; i < tempura::kNumOps; ++i) {
        const Op op = op_at(i);
        CAPTURE(std::string(tempura::op_name(op)));
        if (is_commutative(op)) CHECK(tempura::op_info(op).arity == 2);
    }
}

TEST_CASE("op table: range-ending ops and their range start") {
    using tempura::is_range_ending;
    using tempura::op_info;
    CHECK(op_info(Op::Store).range_start == 2);
    CHECK(op_info(Op::Reduce).range_start == 1);
    CHECK(op_info(Op::End).range_start == 1);
    CHECK(op_info(Op::Add).range_start == -1);
    CHECK(op_info(Op::Range).range_start == -1);
    CHECK(op_info(Op::Load).range_start == -1);
    CHECK(is_range_ending(Op::Store));
    CHECK(is_range_ending(Op::Reduce));
    CHECK(is_range_ending(Op::End));
    CHECK_FALSE(is_range_ending(Op::Range));
    CHECK_FALSE(is_range_ending(Op::ReduceAxis));
    CHECK_FALSE(is_range_ending(Op::Sink));
    // Exactly these ops end ranges.
    std::set<std::string_view> ending;
    for (size_t i = 0; i < tempura::kNumOps; ++i)
        if (is_range_ending(op_at(i))) ending.insert(tempura::op_name(op_at(i)));
    CHECK(ending == std::set<std::string_view>{"END", "REDUCE", "STORE"});
}

TEST_CASE("op table: categories and is_alu") {
    using tempura::op_info;
    CHECK(op_info(Op::Neg).category == OpCategory::Unary);
    CHECK(op_info(Op::Cast).category == OpCategory::Unary);
    CHECK(op_info(Op::Add).category == OpCategory::Binary);
    CHECK(op_info(Op::CmpLt).category == OpCategory::Binary);
    CHECK(op_info(Op::Where).category == OpCategory::Ternary);
    CHECK(op_info(Op::Const).category == OpCategory::Const);
    CHECK(op_info(Op::DefineVar).category == OpCategory::Define);
    CHECK(op_info(Op::Load).category == OpCategory::Memory);
    CHECK(op_info(Op::Store).category == OpCategory::Memory);
    CHECK(op_info(Op::Reshape).category == OpCategory::Movement);
    CHECK(op_info(Op::Permute).category == OpCategory::Movement);
    CHECK(op_info(Op::ReduceAxis).category == OpCategory::Reduce);
    CHECK(op_info(Op::Range).category == OpCategory::Control);
    CHECK(op_info(Op::End).category == OpCategory::Control);
    CHECK(op_info(Op::Vectorize).category == OpCategory::Vector);
    CHECK(op_info(Op::Sink).category == OpCategory::Structure);
    CHECK(op_info(Op::Contiguous).category == OpCategory::Tensor);

    CHECK(tempura::is_alu(Op::Add));
    CHECK(tempura::is_alu(Op::Neg));
    CHECK(tempura::is_alu(Op::Where));
    CHECK(tempura::is_alu(Op::Cast));
    CHECK_FALSE(tempura::is_alu(Op::Const));
    CHECK_FALSE(tempura::is_alu(Op::Load));
    CHECK_FALSE(tempura::is_alu(Op::Sink));
    CHECK_FALSE(tempura::is_alu(Op::Range));

    // ALU ops: 10 unary, 16 binary, 2 ternary; each one's arity matches its category.
    int unary = 0, binary = 0, ternary = 0;
    for (size_t i = 0; i < tempura::kNumOps; ++i) {
        const Op op = op_at(i);
        const auto& info = op_info(op);
        CAPTURE(std::string(info.name));
        if (!tempura::is_alu(op)) continue;
        CHECK(info.arg == tempura::ArgKind::None);
        switch (info.category) {
        case OpCategory::Unary:
            ++unary;
            CHECK(info.arity == 1);
            break;
        case OpCategory::Binary:
            ++binary;
            CHECK(info.arity == 2);
            break;
        case OpCategory::Ternary:
            ++ternary;
            CHECK(info.arity == 3);
            break;
        default: FAIL("is_alu for a non-ALU category");
        }
    }
    CHECK(unary == 12); // NEG NOT EXP2 LOG2 SIN COS ERF SQRT RECIPROCAL TRUNC CAST BITCAST
    CHECK(binary == 16);
    CHECK(ternary == 2);

    CHECK(tempura::is_comparison(Op::CmpLt));
    CHECK(tempura::is_comparison(Op::CmpNe));
    CHECK(tempura::is_comparison(Op::CmpEq));
    CHECK_FALSE(tempura::is_comparison(Op::Max));
}

TEST_CASE("op table: argument kinds and infix symbols") {
    using tempura::ArgKind;
    using tempura::op_info;
    CHECK(op_info(Op::Const).arg == ArgKind::Value);
    CHECK(op_info(Op::DefineVar).arg == ArgKind::Var);
    CHECK(op_info(Op::Range).arg == ArgKind::Range);
    CHECK(op_info(Op::Reshape).arg == ArgKind::Ints);
    CHECK(op_info(Op::ReduceAxis).arg == ArgKind::ReduceOp);
    CHECK(op_info(Op::Add).arg == ArgKind::None);

    CHECK(tempura::op_symbol(Op::Add) == "+");
    CHECK(tempura::op_symbol(Op::Sub) == "-");
    CHECK(tempura::op_symbol(Op::Mul) == "*");
    CHECK(tempura::op_symbol(Op::Idiv) == "/");
    CHECK(tempura::op_symbol(Op::Fdiv) == "/");
    CHECK(tempura::op_symbol(Op::Mod) == "%");
    CHECK(tempura::op_symbol(Op::Shl) == "<<");
    CHECK(tempura::op_symbol(Op::Shr) == ">>");
    CHECK(tempura::op_symbol(Op::And) == "&");
    CHECK(tempura::op_symbol(Op::Or) == "|");
    CHECK(tempura::op_symbol(Op::Xor) == "^");
    CHECK(tempura::op_symbol(Op::CmpLt) == "<");
    CHECK(tempura::op_symbol(Op::CmpNe) == "!=");
    CHECK(tempura::op_symbol(Op::CmpEq) == "==");
    CHECK(tempura::op_symbol(Op::Max).empty());
    CHECK(tempura::op_symbol(Op::Where).empty());
    CHECK(tempura::op_symbol(Op::Neg).empty());
}

TEST_CASE("axis types: priority and names") {
    using tempura::AxisType;
    CHECK(tempura::axis_priority(AxisType::Placeholder) == -3);
    CHECK(tempura::axis_priority(AxisType::Loop) == -1);
    CHECK(tempura::axis_priority(AxisType::Global) == 0);
    CHECK(tempura::axis_priority(AxisType::Reduce) == 4);
    CHECK(tempura::axis_priority(AxisType::Unroll) == 5);
    CHECK(tempura::axis_type_name(AxisType::Loop) == "Loop");
    CHECK(tempura::axis_type_name(AxisType::GroupReduce) == "GroupReduce");
}
