// Unit tests of UOp: hash-consing, construction errors, the weak intern table (no leaks, thread
// safety, deep graphs), tree() and render(), toposort, substitute, node_count and the
// structural order.
#include <doctest/doctest.h>

#include "../support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <latch>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <tempura/tempura.hpp>

namespace {

using tempura::AxisType;
using tempura::DType;
using tempura::Op;
using tempura::RangeArg;
using tempura::UOp;
using tempura::VarArg;

} // namespace

// ---- hash-consing -----------------------------------------------------------------------------

TEST_CASE("hash-consing: the same construction gives the same node") {
    UOp a1 = UOp::variable("hc_a", 0, 10);
    UOp a2 = UOp::variable("hc_a", 0, 10);
    CHECK(a1.same(a2));
    CHECK(a1.get() == a2.get());
    CHECK(a1.id() == a2.id());
    CHECK(a1.hash() == a2.hash());

    CHECK(UOp::index(7).same(UOp::index(7)));
    CHECK(UOp::boolean(true).same(UOp::boolean(true)));
    CHECK(UOp::constant_f(DType::Float32, 1.5).same(UOp::constant_f(DType::Float32, 1.5)));

    UOp e1 = (a1 + 3) * 2;
    UOp e2 = (a2 + 3) * 2;
    CHECK(e1.same(e2));
    // Operators, alu() and make() are three spellings of one node.
    CHECK((a1 + 3).same(UOp::alu(Op::Add, {a1, UOp::index(3)})));
    CHECK((a1 + 3).same(UOp::make(Op::Add, DType::Index, {a1, UOp::index(3)})));
    CHECK((4 + a1).same(UOp::make(Op::Add, DType::Index, {UOp::index(4), a1})));
    CHECK(UOp::sink({a1, e1}).same(UOp::sink({a2, e2})));
    // replace_srcs with the same sources is the node itself.
    CHECK(e1.replace_srcs(e1.srcs()).same(e1));
}

TEST_CASE("hash-consing: a different arg, dtype, op or source order gives a different node") {
    UOp a = UOp::variable("hd_a", 0, 10);
    UOp b = UOp::variable("hd_b", 0, 10);
    CHECK_FALSE(UOp::index(3).same(UOp::index(4)));
    CHECK_FALSE(UOp::index(3).same(UOp::constant(DType::Int32, 3)));
    CHECK_FALSE(UOp::constant(DType::Int32, 3).same(UOp::constant(DType::Int64, 3)));
    CHECK_FALSE(UOp::constant_f(DType::Float32, 1.0).same(UOp::constant_f(DType::Float64, 1.0)));
    CHECK_FALSE(UOp::index(1).same(UOp::boolean(true)));
    CHECK_FALSE(a.same(b));
    CHECK_FALSE(a.same(UOp::variable("hd_a", 0, 11))); // bounds are part of the arg
    CHECK_FALSE(a.same(UOp::variable("hd_a", -1, 10)));
    CHECK_FALSE((a + b).same(b + a)); // no implicit canonical order
    CHECK_FALSE((a + b).same(a - b));
    CHECK_FALSE((a + b).same(UOp::make(Op::Add, DType::Int64, {a, b})));
    CHECK_FALSE(UOp::sink({a, b}).same(UOp::sink({b, a})));
    CHECK_FALSE(UOp::sink({a}).same(UOp::sink({a, a})));
    CHECK_FALSE(UOp::make(Op::Range, DType::Index, {UOp::index(4)}, RangeArg{0, AxisType::Loop})
                    .same(UOp::make(Op::Range, DType::Index, {UOp::index(4)},
                                    RangeArg{1, AxisType::Loop})));
    CHECK_FALSE(UOp::make(Op::Range, DType::Index, {UOp::index(4)}, RangeArg{0, AxisType::Loop})
                    .same(UOp::make(Op::Range, DType::Index, {UOp::index(4)},
                                    RangeArg{0, AxisType::Reduce})));
    // Distinct nodes get distinct ids.
    CHECK(a.id() != b.id());
}

TEST_CASE("hash-consing: a NaN constant is one node") {
    // Building the same NaN constant twice is the same construction. (A NaN compares unequal to
    // itself; the intern table must still find the first node.)
    UOp n1 = UOp::constant_f(DType::Float32, std::nan(""));
    UOp n2 = UOp::constant_f(DType::Float32, std::nan(""));
    CHECK(n1.same(n2));
    const size_t before = tempura::live_uop_count();
    {
        std::vector<UOp> keep;
        for (int i = 0; i < 10; ++i) keep.push_back(UOp::constant_f(DType::Float32, std::nan("")));
        CHECK(tempura::live_uop_count() == before);
    }
    CHECK(tempura::live_uop_count() == before);
}

TEST_CASE("a node records where user code created it") {
    const unsigned line_v = __LINE__ + 1;
    UOp v = UOp::variable("loc_v", 0, 3);
    const unsigned line_s = __LINE__ + 1;
    UOp s = v + 100001;
    CHECK(v.location().line() == line_v);
    CHECK(s.location().line() == line_s);
    CHECK(s.src(1).location().line() == line_s); // the literal's CONST too
    CHECK(std::string(s.location().file_name()).ends_with("test_uop.cpp"));
    CHECK(std::string((v < 100002).location().file_name()).ends_with("test_uop.cpp"));
    CHECK(std::string(tempura::where(v < 100003, v, 0).location().file_name())
              .ends_with("test_uop.cpp"));
    // == and != cannot capture the caller's line: C++20 also tries them with reversed operands,
    // and the capturing `Here` conversion makes `x == 4` ambiguous. They record the library's.
    const std::string eq_file = (v == 100004).location().file_name();
    CHECK(eq_file.ends_with("uop.cpp"));
}

// ---- construction errors ----------------------------------------------------------------------

TEST_CASE("UOp::make checks the arg's kind against the op table") {
    const UOp four = UOp::index(4);
    CHECK(error_of([&] { UOp::make(Op::Range, DType::Index, {four}, int64_t{3}); }) ==
          "[uop] RANGE takes a range (axis, type) as its arg, got an integer");
    CHECK(error_of([&] {
              UOp::make(Op::Add, DType::Index, {four, four}, 1.5);
          }) == "[uop] ADD takes no value as its arg, got a float");
    CHECK(error_of([&] { UOp::make(Op::DefineVar, DType::Index, {}, std::string("n")); }) ==
          "[uop] DEFINE_VAR takes a variable (name, min, max) as its arg, got a string");
    CHECK(error_of([&] { UOp::make(Op::Const, DType::Index, {}, std::vector<int64_t>{1}); }) ==
          "[uop] CONST takes a number as its arg, got a list");
    CHECK_NOTHROW(UOp::make(Op::Range, DType::Index, {four}, tempura::RangeArg{0, {}}));
}

TEST_CASE("UOp::make checks a GEP's lanes against its source and dtype") {
    const UOp v = UOp::make(Op::Vectorize, DType::Index.vec(2), {UOp::index(1), UOp::index(2)});
    CHECK(error_of([&] { UOp::make(Op::Gep, DType::Index, {v}, std::vector<int64_t>{2}); }) ==
          "[uop] GEP of lanes [2] of a indexx2 cannot be a index");
    CHECK(error_of([&] {
              UOp::make(Op::Gep, DType::Index, {v}, std::vector<int64_t>{0, 1});
          }) == "[uop] GEP of lanes [0, 1] of a indexx2 cannot be a index");
    CHECK_NOTHROW(UOp::make(Op::Gep, DType::Index.vec(2), {v}, std::vector<int64_t>{1, 0}));
}

TEST_CASE("UOp::make checks arity against the op table") {
    UOp a = UOp::variable("ar_a", 0, 10);
    CHECK(error_of([&] { UOp::make(Op::Add, DType::Index, {a}); }) ==
          "[uop] ADD takes 2 sources, got 1");
    CHECK(error_of([&] {
              UOp::make(Op::Add, DType::Index, {a, a, a});
          }) == "[uop] ADD takes 2 sources, got 3");
    CHECK(error_of([&] {
              UOp::make(Op::Where, DType::Index, {a, a});
          }) == "[uop] WHERE takes 3 sources, got 2");
    CHECK(error_of([&] { UOp::make(Op::Const, DType::Index, {a}, int64_t{1}); }) ==
          "[uop] CONST takes 0 sources, got 1");
    CHECK(error_of([&] { UOp::make(Op::After, DType::Void, {}); }) ==
          "[uop] AFTER takes at least 1 sources, got 0");
    CHECK(error_of([&] {
              UOp::make(Op::Add, DType::Index, {a, UOp()});
          }) == "[uop] ADD given a null source");
    // Variadic ops take any count at or above their minimum.
    CHECK(UOp::make(Op::Sink, DType::Void, {}).srcs().empty());
    CHECK(UOp::make(Op::Sink, DType::Void, {a, a, a, a}).srcs().size() == 4);
}

TEST_CASE("construction errors name the operation and the values") {
    UOp a = UOp::variable("ce_a", 0, 10);
    CHECK(error_of([] { UOp::variable("n", 5, 2); }) == "[variable] 'n' has min 5 > max 2");
    CHECK(error_of([] { UOp::variable("rows", 0, -1); }) == "[variable] 'rows' has min 0 > max -1");
    CHECK_NOTHROW(UOp::variable("one", 4, 4));
    CHECK(error_of([&] { UOp::alu(Op::Add, {a}); }) == "[alu] ADD takes 2 sources, got 1");
    CHECK(error_of([&] { UOp::alu(Op::Load, {a}); }) == "[alu] LOAD is not an ALU op");
    CHECK(error_of([&] { (void)(a + UOp::constant(DType::Int32, 1)); }) ==
          "[ADD] operand dtypes differ: index and int32 in ce_a + 1");
    CHECK(error_of([&] { (void)tempura::where(a, a, a); }) ==
          "[where] condition must be bool, got index");
    CHECK(error_of([&] { (void)!a; }) == "[not] operand must be bool, got index");
    CHECK(error_of([&] { (void)a.const_value(); }) ==
          "[const_value] node is DEFINE_VAR, not CONST");
    CHECK(error_of([] { (void)UOp::constant_f(DType::Float32, 2.5).const_value(); }) ==
          "[const_value] CONST of dtype float32 is not an integer");
    CHECK(error_of([] { UOp::constant(DType::Void, 1); }) ==
          "[const] no integer constant of dtype void");
    // Every one of them is a tempura::Error, i.e. a std::runtime_error.
    CHECK_THROWS_AS(UOp::variable("n", 1, 0), std::runtime_error);
}

TEST_CASE("constants: values, wrapping and dtypes") {
    CHECK(UOp::index(-4).const_value() == -4);
    CHECK(UOp::boolean(true).const_value() == 1);
    CHECK(UOp::constant(DType::Int8, 200).const_value() == -56);
    CHECK(UOp::constant(DType::UInt8, -1).const_value() == 255);
    CHECK(UOp::constant(DType::Bool, 7).same(UOp::boolean(true)));
    CHECK(UOp::constant(DType::Float32, 3).same(UOp::constant_f(DType::Float32, 3.0)));
    CHECK(UOp::constant_f(DType::Index, 3.9).same(UOp::index(3)));
    UOp a = UOp::variable("cv_a", 0, 10);
    CHECK(a.const_like(5).same(UOp::index(5)));
    CHECK(UOp::constant(DType::Int32, 1).const_like(300).dtype() == DType::Int32);
    CHECK((a < 3).dtype() == DType::Bool);
    CHECK(tempura::where(a < 3, a, 0).dtype() == DType::Index);
}

// ---- the intern table: weak entries, threads, deep graphs ---------------------------------------

TEST_CASE("entries die with their last user") {
    const size_t before = tempura::live_uop_count();
    {
        UOp v = UOp::variable("leak_probe_v", 0, 1000);
        UOp e = v;
        for (int i = 0; i < 1000; ++i) e = e + v; // 1000 fresh ADD nodes, each one new
        CHECK(tempura::live_uop_count() == before + 1001);
        CHECK(e.node_count() == 1001);
    }
    CHECK(tempura::live_uop_count() == before);
    {
        std::vector<UOp> fresh;
        for (int i = 0; i < 1000; ++i) fresh.push_back(UOp::index(9000000 + i));
        CHECK(tempura::live_uop_count() == before + 1000);
        fresh.resize(500);
        CHECK(tempura::live_uop_count() == before + 500);
    }
    CHECK(tempura::live_uop_count() == before);
    // A node built again after it died is a new node (a fresh id) with the same content.
    uint64_t first_id;
    {
        UOp t = UOp::variable("reborn", 0, 1) * 77;
        first_id = t.id();
    }
    UOp t2 = UOp::variable("reborn", 0, 1) * 77;
    CHECK(t2.id() != first_id);
    CHECK(t2.render() == "reborn * 77");
}

// The intern table is open addressing: a node that dies leaves a hole that the entries probed
// past it are shifted back into. Many nodes dying in a random order, with others built between,
// must leave every live node findable (built again, it is the same node) and none found twice.
TEST_CASE("the intern table finds every live node while others die around it") {
    const size_t before = tempura::live_uop_count();
    constexpr int kN = 20000;
    std::vector<UOp> nodes;
    for (int i = 0; i < kN; ++i) nodes.push_back(UOp::index(7100000 + i));
    uint64_t state = 12345;
    auto next = [&] {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return state >> 33;
    };
    for (int round = 0; round < 4; ++round) {
        for (int i = 0; i < kN; ++i)
            if (next() % 2 == 0) nodes[static_cast<size_t>(i)] = UOp(); // dies
        CHECK(tempura::live_uop_count() ==
              before + static_cast<size_t>(std::count_if(
                           nodes.begin(), nodes.end(), [](const UOp& u) { return !u.is_null(); })));
        for (int i = 0; i < kN; ++i) {
            const UOp again = UOp::index(7100000 + i);
            UOp& kept = nodes[static_cast<size_t>(i)];
            if (kept.is_null())
                kept = again; // built anew
            else if (!again.same(kept))
                FAIL("node " << i << " was alive but not found in the intern table");
        }
        CHECK(tempura::live_uop_count() == before + kN);
    }
    nodes.clear();
    CHECK(tempura::live_uop_count() == before);
}

TEST_CASE("UOpMemo: a flat map from nodes, growing, with set() replacing") {
    tempura::UOpMemo<int> m;
    std::vector<UOp> keys;
    for (int i = 0; i < 1000; ++i) keys.push_back(UOp::index(8100000 + i));
    for (int i = 0; i < 1000; ++i) m.emplace(keys[static_cast<size_t>(i)], i);
    CHECK(m.size() == 1000);
    m.emplace(keys[3], -1); // present: its value stays
    CHECK(*m.find(keys[3]) == 3);
    m.set(keys[3], -3);
    CHECK(*m.find(keys[3]) == -3);
    m.set(UOp::index(-8100000), 7); // absent: added
    CHECK(m.size() == 1001);
    CHECK(m.contains(UOp::index(-8100000)));
    CHECK_FALSE(m.contains(UOp::index(9100000)));
    CHECK(m.find(UOp::index(9100000)) == nullptr);
    int wrong = 0;
    for (int i = 0; i < 1000; ++i)
        if (i != 3 && *m.find(UOp::index(8100000 + i)) != i) ++wrong;
    CHECK(wrong == 0);
}

TEST_CASE("the intern table is safe to use from several threads") {
    const size_t before = tempura::live_uop_count();
    constexpr int kN = 10000;
    for (int round = 0; round < 3; ++round) {
        std::vector<UOp> out[2];
        std::latch start(2);
        auto work = [&](int t) {
            std::vector<UOp>& mine = out[t];
            mine.reserve(kN);
            start.arrive_and_wait();
            UOp v = UOp::variable("thread_v", 0, 100);
            UOp w = UOp::variable("thread_w", -5, 5);
            for (int i = 0; i < kN; ++i)
                mine.push_back(tempura::where(v < i % 97, (v + i) * (w - i), v % (i + 1)));
        };
        std::thread t0(work, 0), t1(work, 1);
        t0.join();
        t1.join();
        REQUIRE(out[0].size() == static_cast<size_t>(kN));
        REQUIRE(out[1].size() == static_cast<size_t>(kN));
        int same = 0;
        for (int i = 0; i < kN; ++i) same += out[0][i].same(out[1][i]) ? 1 : 0;
        CHECK(same == kN);
        // Distinct expressions are distinct nodes, and the subterms are shared.
        CHECK_FALSE(out[0][1].same(out[0][2]));
        CHECK(out[0][5].src(0).src(0).same(out[1][6].src(0).src(0))); // the variable v
    }
    CHECK(tempura::live_uop_count() == before);
}

TEST_CASE("a deep chain of 200,000 nested ADDs builds, walks and dies without recursion") {
    const size_t before = tempura::live_uop_count();
    {
        UOp v = UOp::variable("deep_v", 0, 1);
        UOp one = UOp::index(1);
        UOp e = v;
        for (int i = 0; i < 200000; ++i) e = e + one;
        CHECK(e.node_count() == 200002);
        std::vector<UOp> topo = e.toposort();
        REQUIRE(topo.size() == 200002);
        CHECK(topo.front().same(v));
        CHECK(topo[1].same(one));
        CHECK(topo.back().same(e));
        CHECK(e.vmin() == 200000);
        CHECK(e.vmax() == 200001);
        // render() gives up at depth 200 instead of recursing 200,000 deep.
        const std::string r = e.render();
        CHECK(r.find("...") != std::string::npos);
        CHECK(r.ends_with(" + 1"));
        // substitute walks it iteratively as well.
        UOp u = UOp::variable("deep_u", 5, 5);
        UOp s = e.substitute({{v.get(), u}});
        CHECK(s.node_count() == 200002);
        CHECK(s.vmin() == 200005);
        CHECK(s.toposort().front().same(u));
    }
    CHECK(tempura::live_uop_count() == before);
}

// ---- printing ---------------------------------------------------------------------------------

TEST_CASE("tree(): [id] labels, back references to shared nodes, and creation sites") {
    const int lx = __LINE__ + 1;
    UOp x = UOp::variable("tx", 0, 10);
    const int ls = __LINE__ + 1;
    UOp s = x + 123457;
    const int le = __LINE__ + 1;
    UOp e = s * s;
    const std::string at = "  @test_uop.cpp:";
    const std::string expected = "[0] MUL index" + at + std::to_string(le) + "\n" +
                                 "├─ [1] ADD index" + at + std::to_string(ls) + "\n" +
                                 "│  ├─ [2] DEFINE_VAR index tx[0..10]" + at + std::to_string(lx) +
                                 "\n" + "│  └─ [3] CONST index 123457" + at + std::to_string(ls) +
                                 "\n" + "└─ [1] ADD (same as above)\n";
    CHECK(e.tree() == expected);
    CHECK(UOp().tree() == "<null>\n");

    // A node shared deeper down is printed once and referred to afterwards.
    UOp t = UOp::sink({s, e, x});
    const std::string tt = t.tree();
    CHECK(tt.starts_with("[0] SINK void"));
    CHECK(tt.find("[1] ADD (same as above)") != std::string::npos);
    CHECK(tt.find("[2] DEFINE_VAR (same as above)") != std::string::npos);
    CHECK(tt.ends_with("└─ [2] DEFINE_VAR (same as above)\n"));
    // Each distinct node gets one label.
    CHECK(tt.find("[4]") != std::string::npos);
    CHECK(tt.find("[5]") == std::string::npos);
}

TEST_CASE("render(): infix with the fewest parentheses") {
    UOp x = UOp::variable("x", 0, 10);
    UOp y = UOp::variable("y", 0, 10);
    CHECK(x.render() == "x");
    CHECK(UOp::index(-3).render() == "-3");
    CHECK(((x + 3) * 2).render() == "(x + 3) * 2");
    CHECK((x * 2 + 3).render() == "x * 2 + 3");
    CHECK((x + y * 2).render() == "x + y * 2");
    CHECK((x - (y - 1)).render() == "x - (y - 1)");
    CHECK(((x - y) - 1).render() == "x - y - 1");
    CHECK((x + (y + 1)).render() == "x + (y + 1)"); // the tree shape is visible
    CHECK((x / 4 % 3).render() == "x / 4 % 3");
    CHECK((x / (4 % y)).render() == "x / (4 % y)");
    CHECK((x << 2).render() == "x << 2");
    CHECK(((x < 3) & (y < 2)).render() == "x < 3 & y < 2");
    CHECK((x == 3).render() == "x == 3");
    CHECK((x != y).render() == "x != y");
    CHECK((-x).render() == "-x");
    CHECK((-(x + 1)).render() == "-(x + 1)");
    CHECK((-(-x)).render() == "-(-x)");
    CHECK((!(x < 3)).render() == "!(x < 3)");
    CHECK(tempura::where(x < 3, x, 0).render() == "where(x < 3, x, 0)");
    CHECK(tempura::maximum(x, y).render() == "max(x, y)");
    CHECK(tempura::minimum(x, y).render() == "-max(-x, -y)");
    CHECK(UOp::boolean(true).render() == "true");
    CHECK(UOp::boolean(false).render() == "false");
    CHECK(UOp::constant_f(DType::Float32, 2.0).render() == "2.0");
    CHECK(UOp::constant_f(DType::Float32, 1.5).render() == "1.5");
    CHECK(UOp::sink({x, y}).render() == "sink(x, y)");
    CHECK(UOp::make(Op::Range, DType::Index, {UOp::index(10)}, RangeArg{0, AxisType::Loop})
              .render() == "range(10, R0 Loop)");
    CHECK(UOp().render() == "<null>");
}

// ---- graph utilities ----------------------------------------------------------------------------

TEST_CASE("toposort: every reachable node once, sources before users") {
    UOp a = UOp::variable("ts_a", 0, 10);
    UOp b = UOp::variable("ts_b", 0, 10);
    UOp s = a + b;
    UOp root = UOp::sink({s * s, s - a, b});
    std::vector<UOp> topo = root.toposort();
    // a, b, s, s*s, s-a, root
    REQUIRE(topo.size() == 6);
    CHECK(root.node_count() == 6);
    CHECK(topo.back().same(root));
    std::unordered_map<const tempura::UOpNode*, size_t> pos;
    for (size_t i = 0; i < topo.size(); ++i) CHECK(pos.emplace(topo[i].get(), i).second);
    for (const UOp& u : topo)
        for (const UOp& src : u.srcs()) {
            REQUIRE(pos.count(src.get()) == 1);
            CHECK(pos[src.get()] < pos[u.get()]);
        }
    // Depth-first, sources in order: the exact order.
    CHECK(topo[0].same(a));
    CHECK(topo[1].same(b));
    CHECK(topo[2].same(s));
    CHECK(topo[3].same(s * s));
    CHECK(topo[4].same(s - a));
    // A leaf is its own toposort.
    CHECK(a.toposort().size() == 1);
    CHECK(a.node_count() == 1);
}

TEST_CASE("node_count counts distinct nodes") {
    UOp x = UOp::variable("nc_x", 0, 10);
    CHECK(((x + 1) * (x + 1)).node_count() == 4); // x, 1, x+1, the product
    CHECK(((x + 1) * (x + 2)).node_count() == 6);
    CHECK(((x + 1) * (1 + x)).node_count() == 5);
    CHECK(UOp::sink({}).node_count() == 1);
    // A DAG whose tree form has 2^40 nodes.
    UOp e = x;
    for (int i = 0; i < 40; ++i) e = e + e;
    CHECK(e.node_count() == 41);
}

TEST_CASE("substitute replaces nodes by identity everywhere below the root") {
    UOp x = UOp::variable("sb_x", 0, 10);
    UOp y = UOp::variable("sb_y", 0, 10);
    UOp e = (x + 1) * (x + 2);
    CHECK(e.substitute({{x.get(), y}}).same((y + 1) * (y + 2)));
    // An inner node.
    UOp inner = x + 1;
    CHECK(e.substitute({{inner.get(), y}}).same(y * (x + 2)));
    // The root itself.
    CHECK(e.substitute({{e.get(), y}}).same(y));
    // Nothing to replace: the very same node.
    CHECK(e.substitute({{y.get(), x}}).same(e));
    CHECK(e.substitute({}).same(e));
    // Replacements are not substituted into again.
    CHECK(e.substitute({{x.get(), x + 1}}).same((x + 1 + 1) * (x + 1 + 2)));
    // A replaced node's sources are not visited through the replacement.
    CHECK(e.substitute({{inner.get(), x}, {x.get(), y}}).same(x * (y + 2)));
}

TEST_CASE("compare_structural is a total order consistent with same()") {
    UOp a = UOp::variable("cs_a", 0, 10);
    UOp b = UOp::variable("cs_b", 0, 10);
    std::vector<UOp> nodes = {
        a,
        b,
        UOp::variable("cs_a", 0, 11),
        UOp::index(-2),
        UOp::index(3),
        UOp::index(40),
        UOp::constant(DType::Int32, 3),
        UOp::boolean(false),
        UOp::boolean(true),
        UOp::constant_f(DType::Float32, 0.5),
        UOp::constant_f(DType::Float32, 2.0),
        a + b,
        b + a,
        a + 3,
        a * b,
        a - b,
        (a + b) * 2,
        (a + b) * 3,
        a < b,
        UOp::sink({a}),
        UOp::sink({a, b}),
        UOp::make(Op::Range, DType::Index, {UOp::index(4)}, RangeArg{0, AxisType::Loop}),
        UOp::make(Op::Range, DType::Index, {UOp::index(4)}, RangeArg{1, AxisType::Loop}),
    };
    const size_t n = nodes.size();
    for (size_t i = 0; i < n; ++i) {
        CAPTURE(nodes[i].render());
        CHECK(tempura::compare_structural(nodes[i], nodes[i]) == 0);
        for (size_t j = 0; j < n; ++j) {
            if (i == j) continue;
            CAPTURE(nodes[j].render());
            const int c = tempura::compare_structural(nodes[i], nodes[j]);
            const int r = tempura::compare_structural(nodes[j], nodes[i]);
            CHECK(c != 0); // distinct nodes are never equal
            CHECK((c < 0) == (r > 0));
        }
    }
    // Transitivity.
    int violations = 0;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j)
            for (size_t k = 0; k < n; ++k)
                if (tempura::compare_structural(nodes[i], nodes[j]) < 0 &&
                    tempura::compare_structural(nodes[j], nodes[k]) < 0 &&
                    !(tempura::compare_structural(nodes[i], nodes[k]) < 0))
                    ++violations;
    CHECK(violations == 0);
    // Ordered by op first (the enum order), then value.
    CHECK(tempura::compare_structural(UOp::index(3), UOp::index(40)) < 0);
    CHECK(tempura::compare_structural(UOp::index(-2), UOp::index(3)) < 0);
    CHECK(tempura::compare_structural(a + b, a * b) < 0);         // ADD before MUL
    CHECK(tempura::compare_structural(a + b, UOp::index(3)) < 0); // ALU before CONST
    // Sorting is deterministic whatever the input order.
    std::vector<UOp> s1 = nodes, s2(nodes.rbegin(), nodes.rend());
    auto less = [](const UOp& p, const UOp& q) { return tempura::compare_structural(p, q) < 0; };
    std::sort(s1.begin(), s1.end(), less);
    std::sort(s2.begin(), s2.end(), less);
    for (size_t i = 0; i < n; ++i) CHECK(s1[i].same(s2[i]));
}

TEST_CASE("compare_structural on float constants that compare equal or unordered") {
    // +0.0 and -0.0 are distinct nodes, so the order must not call them equal.
    UOp pz = UOp::constant_f(DType::Float32, 0.0);
    UOp nz = UOp::constant_f(DType::Float32, -0.0);
    CHECK_FALSE(pz.same(nz));
    CHECK(pz.render() == "0.0");
    CHECK(nz.render() == "-0.0");
    CHECK(tempura::compare_structural(pz, nz) != 0);
    // NaN: the order must stay antisymmetric.
    UOp n1 = UOp::constant_f(DType::Float32, std::nan(""));
    UOp n2 = UOp::constant_f(DType::Float32, std::nan(""));
    if (!n1.same(n2)) {
        const int c = tempura::compare_structural(n1, n2);
        const int r = tempura::compare_structural(n2, n1);
        CHECK((c < 0) == (r > 0));
    }
}

// A UOp held by a static object outlives the main thread's thread_locals at exit; releasing it
// then must not touch them (it corrupted the heap). The static here is destroyed after the
// test runner returns, so a failure shows as a crash (or an ASan report) at exit.
TEST_CASE("a UOp held by a static is released safely at exit") {
    static tempura::UOp held;
    held = tempura::UOp::variable("held_at_exit", 0, 9) + 1;
    CHECK(held.node_count() == 3);
}
