#pragma once
// UOp: the one IR node of Tempura. Immutable and hash-consed: building the same
// (op, dtype, srcs, arg) twice returns the same node, so identity is pointer identity.
// The intern table holds weak entries (a node dies with its last user) and is thread-safe.
//
// Because `==`, `<` and friends on UOp build comparison nodes (as in the symbolic API),
// identity is spelled `a.same(b)`; UOpHash/UOpSame make UOp usable as a hash-map key.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "tempura/ir/dtype.hpp"
#include "tempura/ir/ops.hpp"
#include "tempura/ir/shape.hpp"

namespace tempura {

// DEFINE_VAR's argument: a named integer with inclusive bounds.
struct VarArg {
    std::string name;
    int64_t min = 0;
    int64_t max = 0;
    bool operator==(const VarArg&) const = default;
};

// RANGE's argument: which axis, and how the loop is scheduled.
struct RangeArg {
    int64_t axis_id = 0;
    AxisType type = AxisType::Loop;
    bool operator==(const RangeArg&) const = default;
};

// REDUCE_AXIS's argument: the combining op and the (sorted) axes reduced.
struct ReduceArg {
    Op op = Op::Add;
    std::vector<int64_t> axes;
    bool operator==(const ReduceArg&) const = default;
};

// The argument of a node; which alternative an op uses is its ArgKind in the op table.
// For CONST: int64_t for integers and Index, bool for Bool, double for floats.
// For REDUCE_AXIS/REDUCE/ALLREDUCE: the combining Op (Add, Mul, Max, ...).
using Arg = std::variant<std::monostate, int64_t, double, bool, std::string, std::vector<int64_t>,
                         VarArg, RangeArg, Op, ReduceArg>;

uint64_t hash_arg(const Arg& a);

// The shape table of the tensor-level graph (docs/KERNEL_IR.md section 1): BUFFER [numel],
// CONST [], movement ops from their args, ALU ops from their (equal) operands, REDUCE_AXIS keeps
// reduced dims as 1. The shape a node of `op` with these sources and arg has, or nullopt when it
// has none (a kernel-level op, a source without a shape, or an arg that breaks the table); then
// `why`, when given, says what is wrong (e.g. "RESHAPE of [2, 3] into [4] changes the number of
// elements"). Never throws: it runs for every node built.
class UOp;
std::optional<Shape> infer_shape(Op op, const std::vector<UOp>& srcs, const Arg& arg,
                                 std::string* why = nullptr);
// Why a node has no shape: what is wrong with the first node below it (sources first) that has
// none although its sources do; "" when it has one.
std::string why_no_shape(const UOp& u);
[[noreturn]] void throw_no_shape(const UOp& u);
std::string arg_to_string(const Arg& a);

// ---- provenance: the user's line on every node ----------------------------------------------
// The call site of the outermost public Tensor or nn call running on this thread (null outside
// one). While it is set, every node built records it instead of the location its builder passed
// (so a softmax's max, exp and sum name the user's softmax line, not the library's), and fail()
// names it: "[reshape] at model.cpp:42: cannot reshape ...". The location is not part of a node's
// identity: the same expression built on two lines is one node (it keeps the line that built it
// first, while it lives), and shares its kernels.
namespace detail {
inline thread_local const std::source_location* g_call_site = nullptr;
}
inline const std::source_location* call_site() noexcept { return detail::g_call_site; }
// Each public entry point holds one for the call: only the outermost takes effect.
class UserCall {
  public:
    explicit UserCall(const std::source_location& loc) noexcept : prev_(detail::g_call_site) {
        if (prev_ == nullptr) detail::g_call_site = &loc;
    }
    ~UserCall() { detail::g_call_site = prev_; }
    UserCall(const UserCall&) = delete;
    UserCall& operator=(const UserCall&) = delete;

  private:
    const std::source_location* prev_;
};
// Sets the call site for its lifetime, whatever was set (null: none). realize() compiles with
// none (its nodes keep the locations their builders pass on); autograd builds each gradient at
// the site of the forward node it differentiates.
class CallSiteOverride {
  public:
    explicit CallSiteOverride(const std::source_location* loc) noexcept
        : prev_(detail::g_call_site) {
        detail::g_call_site = loc;
    }
    ~CallSiteOverride() { detail::g_call_site = prev_; }
    CallSiteOverride(const CallSiteOverride&) = delete;
    CallSiteOverride& operator=(const CallSiteOverride&) = delete;

  private:
    const std::source_location* prev_;
};
// "model.cpp:42": a location's file name without its directories, and its line.
std::string site_string(const std::source_location& loc);

class UOpNode;

class UOp {
  public:
    UOp() = default; // the null UOp; only valid to test with `is_null()` and to assign to

    // The one constructor of nodes: checks arity against the op table, interns the node.
    static UOp make(Op op, DType dtype, std::vector<UOp> srcs, Arg arg = {},
                    std::source_location loc = std::source_location::current());

    // Public API (DESIGN.md).
    static UOp variable(std::string name, int64_t min, int64_t max,
                        std::source_location loc = std::source_location::current());
    static UOp index(int64_t value, std::source_location loc = std::source_location::current());
    static UOp boolean(bool value, std::source_location loc = std::source_location::current());
    static UOp sink(std::vector<UOp> srcs,
                    std::source_location loc = std::source_location::current());

    // Constants of any dtype. Integer values are wrapped to the dtype's width.
    static UOp constant(DType dtype, int64_t value,
                        std::source_location loc = std::source_location::current());
    static UOp constant_f(DType dtype, double value,
                          std::source_location loc = std::source_location::current());
    // An ALU node whose dtype follows the op: Bool for comparisons, the true branch for WHERE,
    // otherwise the first source's.
    static UOp alu(Op op, std::vector<UOp> srcs,
                   std::source_location loc = std::source_location::current());

    Op op() const;
    DType dtype() const;
    const std::vector<UOp>& srcs() const;
    const UOp& src(size_t i) const;
    const Arg& arg() const;
    template <class T>
    const T& arg_as() const {
        return std::get<T>(arg());
    }
    uint64_t hash() const;
    uint64_t id() const; // creation order, unique for the process lifetime
    const std::source_location& location() const;

    // Bounds: exact for integer and bool nodes; [INT64_MIN, INT64_MAX] when unknown.
    int64_t vmin() const;
    int64_t vmax() const;

    // The tensor shape of a tensor-level node (inferred when it is built, see infer_shape);
    // kernel-level nodes and malformed tensor graphs have none. shape() throws tempura::Error
    // ("[shape] ...", saying why) for a node without one.
    bool has_shape() const;
    const Shape& shape() const;

    bool same(const UOp& o) const { return p_ == o.p_; }
    bool is_null() const { return p_ == nullptr; }
    const UOpNode* get() const { return p_.get(); }

    bool is_const() const;
    // The value of an integer or bool CONST (throws tempura::Error otherwise).
    int64_t const_value() const;
    // A CONST with this node's dtype.
    UOp const_like(int64_t value) const;
    // The same op, dtype and arg with other sources.
    UOp replace_srcs(std::vector<UOp> srcs) const;

    std::vector<UOp> toposort() const; // every reachable node, sources before users
    size_t node_count() const;         // distinct nodes reachable (this one included)
    std::string tree() const;          // the graph with [id] labels and back references
    std::string render() const;        // a readable one-line form, e.g. "(x + 3) / 4"
    // The graph in Graphviz's dot language (`dot -Tsvg` draws it): a box per node with its op,
    // dtype and arg, an edge from each source to its user, labelled with the source's position
    // where a node has several.
    std::string to_dot() const;
    // The same with the caller's node ids (`id="..."` in the SVG dot makes), e.g. to name one
    // node alike in several graphs; nodes in `highlight` are drawn in red; with max_depth, only
    // the nodes within that many edges of this one (what lies further is drawn as "...").
    std::string to_dot(const std::function<std::string(const UOp&)>& node_id,
                       const std::unordered_set<const UOpNode*>& highlight = {},
                       size_t max_depth = SIZE_MAX) const;
    // Replaces nodes (by identity) everywhere below and including this one.
    UOp substitute(const std::unordered_map<const UOpNode*, UOp>& map) const;

  private:
    explicit UOp(std::shared_ptr<const UOpNode> p) : p_(std::move(p)) {}
    std::shared_ptr<const UOpNode> p_;
    friend struct UOpFactory;
};

class UOpNode : public std::enable_shared_from_this<UOpNode> {
  public:
    Op op;
    DType dtype;
    std::vector<UOp> srcs;
    Arg arg;
    uint64_t hash;
    uint64_t id;
    int64_t vmin;
    int64_t vmax;
    std::source_location loc;
    std::optional<Shape> shape;
};

inline Op UOp::op() const { return p_->op; }
inline DType UOp::dtype() const { return p_->dtype; }
inline const std::vector<UOp>& UOp::srcs() const { return p_->srcs; }
inline const UOp& UOp::src(size_t i) const { return p_->srcs[i]; }
inline const Arg& UOp::arg() const { return p_->arg; }
inline uint64_t UOp::hash() const { return p_->hash; }
inline uint64_t UOp::id() const { return p_->id; }
inline const std::source_location& UOp::location() const { return p_->loc; }
inline int64_t UOp::vmin() const { return p_->vmin; }
inline int64_t UOp::vmax() const { return p_->vmax; }
inline bool UOp::is_const() const { return p_->op == Op::Const; }
inline bool UOp::has_shape() const { return p_->shape.has_value(); }
inline const Shape& UOp::shape() const {
    if (!p_->shape) [[unlikely]]
        throw_no_shape(*this);
    return *p_->shape;
}

struct UOpHash {
    size_t operator()(const UOp& u) const { return static_cast<size_t>(u.hash()); }
};
struct UOpSame {
    bool operator()(const UOp& a, const UOp& b) const { return a.same(b); }
};
template <class V>
using UOpMap = std::unordered_map<UOp, V, UOpHash, UOpSame>;

// A map from nodes to V for one walk over a graph: open addressing over the nodes' own hashes,
// one allocation for the whole table (a UOpMap allocates a node per entry, which on a large
// graph costs more than the walk). Entries are never removed. Keys are held, so a node cannot
// die and have its address reused by a new node while the table lives. A pointer that find()
// returns is valid until the next emplace().
template <class V>
class UOpMemo {
  public:
    UOpMemo() : slots_(16) {}
    // Sized for `expected` entries without growing.
    explicit UOpMemo(size_t expected) : slots_(capacity_for(expected)) {}
    const V* find(const UOp& k) const {
        for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
            const Slot& s = slots_[i];
            if (s.key.is_null()) return nullptr;
            if (s.key.same(k)) return &s.value;
        }
    }
    V* find(const UOp& k) { return const_cast<V*>(std::as_const(*this).find(k)); }
    bool contains(const UOp& k) const { return find(k) != nullptr; }
    // Adds k -> v unless k is present (its value stays).
    void emplace(const UOp& k, V v) {
        if ((count_ + 1) * 2 > slots_.size()) grow();
        put(k, std::move(v));
    }
    // Adds k -> v, or replaces k's value.
    void set(const UOp& k, V v) {
        if (V* old = find(k)) {
            *old = std::move(v);
            return;
        }
        emplace(k, std::move(v));
    }
    size_t size() const { return count_; }

  private:
    struct Slot {
        UOp key;
        V value{};
    };
    static size_t capacity_for(size_t n) {
        size_t c = 16;
        while (c < 2 * n + 2) c *= 2;
        return c;
    }
    size_t slot_of(const UOp& k) const {
        const uint64_t h = k.hash();
        return static_cast<size_t>(h ^ (h >> 29)) & (slots_.size() - 1);
    }
    template <class K>
    void put(K&& k, V&& v) {
        for (size_t i = slot_of(k);; i = (i + 1) & (slots_.size() - 1)) {
            Slot& s = slots_[i];
            if (s.key.is_null()) {
                s.key = std::forward<K>(k);
                s.value = std::move(v);
                ++count_;
                return;
            }
            if (s.key.same(k)) return;
        }
    }
    void grow() {
        std::vector<Slot> old(slots_.size() * 2);
        old.swap(slots_);
        count_ = 0;
        for (Slot& s : old) // moved: no reference counting for the entries carried over
            if (!s.key.is_null()) put(std::move(s.key), std::move(s.value));
    }
    std::vector<Slot> slots_;
    size_t count_ = 0;
};

// Number of live interned nodes (for leak tests).
size_t live_uop_count();

// `u` with sources `srcs`: `u` itself when they are the ones it has (no intern-table lookup).
UOp with_srcs(const UOp& u, std::vector<UOp> srcs);

// Rebuilds a graph sources first: `f(node, its rebuilt sources)` gives each node's replacement
// (`with_srcs(node, srcs)` keeps it). Returns the root's replacement.
template <class F>
UOp rebuild_graph(const UOp& root, F&& f) {
    const std::vector<UOp> topo = root.toposort();
    UOpMemo<UOp> done(topo.size());
    for (const UOp& u : topo) {
        std::vector<UOp> srcs;
        srcs.reserve(u.srcs().size());
        for (const UOp& s : u.srcs()) srcs.push_back(*done.find(s)); // sources come first
        done.emplace(u, f(u, std::move(srcs)));
    }
    return *done.find(root);
}

// The structure of a program or graph as bytes: per node (every source listed before its user)
// its op, dtype, arg (numbers by their bits) and the positions of its sources; equal for equal
// graphs however and whenever their UOps were built. The key of the plan, kernel and BEAM
// caches. `arg_key(u, key)`, when given and true for a node, has appended that node's arg itself
// (the plan cache writes a BUFFER as its input position). Throws tempura::Error
// ("[where] position i: ...") for a null node or a source listed after its user.
std::string structure_key(const std::vector<UOp>& nodes, const std::string& where,
                          const std::function<bool(const UOp&, std::string&)>& arg_key = {});

// Structural total order (op, dtype, arg, then sources): deterministic across runs, used for
// canonical operand order. Returns <0, 0 or >0.
int compare_structural(const UOp& a, const UOp& b);

// ---- operators (build nodes; comparisons yield Bool nodes) --------------------------------
// The left operand is taken through `Here`, whose defaulted source_location argument records
// the user's call site (operators cannot have default arguments themselves).
struct Here {
    const UOp& u;
    std::source_location loc;
    Here(const UOp& u_, std::source_location l = std::source_location::current()) : u(u_), loc(l) {}
};
struct HereInt {
    int64_t v;
    std::source_location loc;
    HereInt(int64_t v_, std::source_location l = std::source_location::current()) : v(v_), loc(l) {}
};

#define TEMPURA_BINOP(sym, OP)                                                                     \
    UOp operator sym(Here a, const UOp& b);                                                        \
    UOp operator sym(Here a, int64_t b);                                                           \
    UOp operator sym(HereInt a, const UOp& b);
TEMPURA_BINOP(+, Add)
TEMPURA_BINOP(-, Sub)
TEMPURA_BINOP(*, Mul)
TEMPURA_BINOP(/, Idiv)
TEMPURA_BINOP(%, Mod)
TEMPURA_BINOP(<, CmpLt)
TEMPURA_BINOP(&, And)
TEMPURA_BINOP(|, Or)
TEMPURA_BINOP(^, Xor)
TEMPURA_BINOP(<<, Shl)
TEMPURA_BINOP(>>, Shr)
#undef TEMPURA_BINOP
// == and != take plain operands: C++20 also tries them with the operands reversed, and the
// `Here` conversion would make `x == 4` ambiguous between the two orders.
UOp operator==(const UOp& a, const UOp& b);
UOp operator==(const UOp& a, int64_t b);
UOp operator==(int64_t a, const UOp& b);
UOp operator!=(const UOp& a, const UOp& b);
UOp operator!=(const UOp& a, int64_t b);
UOp operator!=(int64_t a, const UOp& b);
UOp operator-(Here a);
UOp operator!(Here a); // logical not of a Bool node

UOp where(const UOp& c, const UOp& t, const UOp& f,
          std::source_location loc = std::source_location::current());
UOp where(const UOp& c, int64_t t, const UOp& f,
          std::source_location loc = std::source_location::current());
UOp where(const UOp& c, const UOp& t, int64_t f,
          std::source_location loc = std::source_location::current());
UOp maximum(const UOp& a, const UOp& b, std::source_location loc = std::source_location::current());
UOp maximum(const UOp& a, int64_t b, std::source_location loc = std::source_location::current());
UOp maximum(int64_t a, const UOp& b, std::source_location loc = std::source_location::current());
UOp minimum(const UOp& a, const UOp& b, std::source_location loc = std::source_location::current());

} // namespace tempura
