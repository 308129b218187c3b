// The intern table and the node-level operations of UOp.
#include "tempura/ir/uop.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string_view>
#include <type_traits>
#include <unordered_set>

#include "tempura/error.hpp"
#include "tempura/ir/bounds.hpp"
#include "tempura/support/hash.hpp"

namespace tempura {

void fail(const std::string& op, const std::string& message) {
    if (const std::source_location* site = call_site())
        throw Error("[" + op + "] at " + site_string(*site) + ": " + message);
    throw Error("[" + op + "] " + message);
}

std::string site_string(const std::source_location& loc) {
    const std::string_view f = loc.file_name();
    const size_t slash = f.find_last_of('/');
    std::string out(slash == std::string_view::npos ? f : f.substr(slash + 1));
    return out + ":" + std::to_string(loc.line());
}

std::string DType::name() const {
    static constexpr const char* names[] = {"void",    "bool",     "int8",    "int16",   "int32",
                                            "int64",   "uint8",    "uint16",  "uint32",  "uint64",
                                            "float16", "bfloat16", "float32", "float64", "index"};
    std::string s = names[static_cast<int>(scalar)];
    if (count != 1) s += "x" + std::to_string(count);
    if (is_ptr) {
        static constexpr const char* spaces[] = {"global", "local", "reg"};
        s += std::string("*[") + spaces[static_cast<int>(addrspace)] + "]";
    }
    return s;
}

std::string_view axis_type_name(AxisType t) {
    switch (t) {
    case AxisType::Placeholder: return "Placeholder";
    case AxisType::Loop: return "Loop";
    case AxisType::Global: return "Global";
    case AxisType::Thread: return "Thread";
    case AxisType::Warp: return "Warp";
    case AxisType::Local: return "Local";
    case AxisType::GroupReduce: return "GroupReduce";
    case AxisType::Upcast: return "Upcast";
    case AxisType::Reduce: return "Reduce";
    case AxisType::Unroll: return "Unroll";
    }
    return "?";
}

namespace {

inline uint64_t mix(uint64_t h, uint64_t v) { return hash_combine(h, v); }
inline uint64_t finish(uint64_t h) { return hash_finalize(h); }
uint64_t hash_bytes(const void* p, size_t n) {
    return std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(p), n));
}

} // namespace

uint64_t hash_arg(const Arg& a) {
    uint64_t h = a.index();
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::monostate>) {
            } else if constexpr (std::is_same_v<T, int64_t>) {
                h = mix(h, static_cast<uint64_t>(v));
            } else if constexpr (std::is_same_v<T, double>) {
                uint64_t bits;
                std::memcpy(&bits, &v, sizeof bits);
                h = mix(h, bits);
            } else if constexpr (std::is_same_v<T, bool>) {
                h = mix(h, v ? 1 : 0);
            } else if constexpr (std::is_same_v<T, std::string>) {
                h = mix(h, hash_bytes(v.data(), v.size()));
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                for (int64_t x : v) h = mix(h, static_cast<uint64_t>(x));
            } else if constexpr (std::is_same_v<T, VarArg>) {
                h = mix(h, hash_bytes(v.name.data(), v.name.size()));
                h = mix(h, static_cast<uint64_t>(v.min));
                h = mix(h, static_cast<uint64_t>(v.max));
            } else if constexpr (std::is_same_v<T, RangeArg>) {
                h = mix(h, static_cast<uint64_t>(v.axis_id));
                h = mix(h, static_cast<uint64_t>(v.type));
            } else if constexpr (std::is_same_v<T, Op>) {
                h = mix(h, static_cast<uint64_t>(v));
            } else if constexpr (std::is_same_v<T, ReduceArg>) {
                h = mix(h, static_cast<uint64_t>(v.op));
                for (int64_t x : v.axes) h = mix(h, static_cast<uint64_t>(x));
            }
        },
        a);
    return h;
}

std::string arg_to_string(const Arg& a) {
    std::ostringstream os;
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::monostate>) {
            } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
                os << v;
            } else if constexpr (std::is_same_v<T, bool>) {
                os << (v ? "true" : "false");
            } else if constexpr (std::is_same_v<T, std::string>) {
                os << '"' << v << '"';
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                os << '[';
                for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
                os << ']';
            } else if constexpr (std::is_same_v<T, VarArg>) {
                os << v.name << '[' << v.min << ".." << v.max << ']';
            } else if constexpr (std::is_same_v<T, RangeArg>) {
                os << 'R' << v.axis_id << ' ' << axis_type_name(v.type);
            } else if constexpr (std::is_same_v<T, Op>) {
                os << op_name(v);
            } else if constexpr (std::is_same_v<T, ReduceArg>) {
                os << op_name(v.op) << " axes [";
                for (size_t i = 0; i < v.axes.size(); ++i) os << (i ? ", " : "") << v.axes[i];
                os << ']';
            }
        },
        a);
    return os.str();
}

// ---- the intern table -------------------------------------------------------------------------

namespace {

// Each shard is an open-addressing hash set (linear probing) of raw node pointers beside their
// hashes: a lookup that misses reads only the table, not the nodes it passes, and a node needs
// no chain pointer (measured against the chained set it replaced: no faster on a 100,000-node
// chain, within noise). A node's memory stays valid while the shard lock is held (its deleter takes
// the lock before freeing), and a lookup resurrects a hit with weak_from_this(), which fails for a
// node that is already dying.
struct Shard {
    struct Slot {
        uint64_t hash = 0;
        const UOpNode* node = nullptr;
    };
    std::mutex mu;
    std::vector<Slot> slots = std::vector<Slot>(64);
    size_t size = 0;

    size_t home(uint64_t h) const { return static_cast<size_t>(h) & (slots.size() - 1); }
    size_t next(size_t i) const { return (i + 1) & (slots.size() - 1); }
    void insert(const UOpNode* n) {
        if ((size + 1) * 2 > slots.size()) grow();
        place(n->hash, n);
        ++size;
    }
    void place(uint64_t h, const UOpNode* n) {
        size_t i = home(h);
        while (slots[i].node != nullptr) i = next(i);
        slots[i] = Slot{h, n};
    }
    // Unlinks n (nothing when it was never linked), shifting back the entries after it that
    // probed past its slot, so that no lookup stops early at the hole.
    void erase(const UOpNode* n) {
        size_t i = home(n->hash);
        while (slots[i].node != n) {
            if (slots[i].node == nullptr) return;
            i = next(i);
        }
        for (size_t j = next(i);; j = next(j)) {
            if (slots[j].node == nullptr) break;
            const size_t k = home(slots[j].hash);
            // Entry j may move to the hole at i unless its home lies cyclically in (i, j].
            const bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
            if (!stays) {
                slots[i] = slots[j];
                i = j;
            }
        }
        slots[i] = Slot{};
        --size;
    }
    void grow() {
        std::vector<Slot> old(slots.size() * 2);
        old.swap(slots);
        for (const Slot& e : old)
            if (e.node != nullptr) place(e.hash, e.node);
    }
};

constexpr size_t kShards = 64;

struct Table {
    Shard shards[kShards];
    std::atomic<uint64_t> next_id{0};
    std::atomic<size_t> live{0};
};

Table& table() {
    // Never destroyed: nodes may be released by static destructors of other TUs after ours.
    static Table* t = new Table;
    return *t;
}

Shard& shard_for(uint64_t h) { return table().shards[(h >> 58) % kShards]; }

// Nodes are freed outside of any recursion: freeing a node releases its sources, which may
// free them in turn; a deep chain would otherwise overflow the stack.
// A UOp held by a static object is released after this thread's thread_locals are destroyed
// (at exit the main thread's go first): from then on nodes are deleted directly (recursively,
// which only a very deep graph freed at exit could mind). The flag is trivially destructible,
// so it stays readable until the thread is gone.
thread_local bool releaser_gone = false;
struct Releaser {
    bool active = false;
    std::vector<const UOpNode*> pending;
    ~Releaser() { releaser_gone = true; }
};

void free_node(const UOpNode* n) {
    {
        Shard& s = shard_for(n->hash);
        std::lock_guard<std::mutex> lock(s.mu);
        s.erase(n);
    }
    table().live.fetch_sub(1, std::memory_order_relaxed);
    if (releaser_gone) {
        delete n;
        return;
    }
    thread_local Releaser r;
    if (r.active) {
        r.pending.push_back(n);
        return;
    }
    r.active = true;
    delete n;
    while (!r.pending.empty()) {
        const UOpNode* p = r.pending.back();
        r.pending.pop_back();
        delete p;
    }
    r.active = false;
}

// Argument identity for interning: doubles compare by bits, so NaN constants are reused and
// -0.0 stays distinct from 0.0.
bool args_identical(const Arg& a, const Arg& b) {
    if (auto* da = std::get_if<double>(&a)) {
        auto* db = std::get_if<double>(&b);
        return db && std::memcmp(da, db, sizeof(double)) == 0;
    }
    return a == b;
}

bool same_content(const UOpNode* n, uint64_t h, Op op, DType dtype, const std::vector<UOp>& srcs,
                  const Arg& arg) {
    if (n->hash != h || n->op != op || !(n->dtype == dtype) || n->srcs.size() != srcs.size())
        return false;
    for (size_t i = 0; i < srcs.size(); ++i)
        if (!n->srcs[i].same(srcs[i])) return false;
    return args_identical(n->arg, arg);
}

// A live node equal to the given content, or null. Called under the shard lock, so it must
// never release an owning pointer: if it dropped the last owner of a node, that node's deleter
// (free_node) would take the lock this thread holds. That is why the weak pointer is taken from
// the non-const node: `weak_from_this()` on a const node converts weak_ptr<UOpNode> to
// weak_ptr<const UOpNode>, which libstdc++ does through a temporary shared_ptr, and that
// temporary can be the last owner when another thread drops its reference meanwhile.
std::shared_ptr<const UOpNode> find_live(Shard& s, uint64_t h, Op op, DType dtype,
                                         const std::vector<UOp>& srcs, const Arg& arg) {
    for (size_t i = s.home(h); s.slots[i].node != nullptr; i = s.next(i)) {
        const UOpNode* n = s.slots[i].node;
        if (s.slots[i].hash == h && same_content(n, h, op, dtype, srcs, arg)) {
            std::weak_ptr<UOpNode> w = const_cast<UOpNode*>(n)->weak_from_this();
            if (std::shared_ptr<UOpNode> sp = w.lock()) return sp; // handed out, not released
            // else: dying; its deleter will unlink it. Keep looking, then build afresh.
        }
    }
    return nullptr;
}

// Whether an arg is of the kind the op table names for the op (the Arg alternatives by index:
// monostate, int64, double, bool, string, ints, VarArg, RangeArg, Op, ReduceArg).
bool arg_fits(ArgKind kind, const Arg& a) {
    switch (kind) {
    case ArgKind::None: return std::holds_alternative<std::monostate>(a);
    case ArgKind::Value:
        return std::holds_alternative<int64_t>(a) || std::holds_alternative<double>(a) ||
               std::holds_alternative<bool>(a);
    case ArgKind::Ints: return std::holds_alternative<std::vector<int64_t>>(a);
    case ArgKind::Var: return std::holds_alternative<VarArg>(a);
    case ArgKind::Range: return std::holds_alternative<RangeArg>(a);
    case ArgKind::ReduceOp:
        return std::holds_alternative<Op>(a) || std::holds_alternative<ReduceArg>(a);
    case ArgKind::Any: return true;
    }
    return false;
}
const char* arg_kind_name(ArgKind kind) {
    switch (kind) {
    case ArgKind::None: return "no value";
    case ArgKind::Value: return "a number";
    case ArgKind::Ints: return "a list of integers";
    case ArgKind::Var: return "a variable (name, min, max)";
    case ArgKind::Range: return "a range (axis, type)";
    case ArgKind::ReduceOp: return "a reduce op";
    case ArgKind::Any: return "anything";
    }
    return "?";
}
const char* arg_alternative_name(const Arg& a) {
    static constexpr const char* names[] = {"no value", "an integer",       "a float",    "a bool",
                                            "a string", "a list",           "a variable", "a range",
                                            "an op",    "a reduce argument"};
    return names[a.index()];
}

} // namespace

struct UOpFactory {
    static UOp intern(Op op, DType dtype, std::vector<UOp>&& srcs, Arg&& arg,
                      const std::source_location& loc) {
        uint64_t h = mix(static_cast<uint64_t>(op) * 0x100000001b3ULL,
                         static_cast<uint64_t>(dtype.scalar) | (uint64_t{dtype.count} << 8) |
                             (uint64_t{dtype.is_ptr} << 24) |
                             (static_cast<uint64_t>(dtype.addrspace) << 25));
        for (const UOp& s : srcs) h = mix(h, s.id());
        if (arg.index() != 0) h = mix(h, hash_arg(arg));
        h = finish(h);
        Shard& s = shard_for(h);
        {
            std::lock_guard<std::mutex> lock(s.mu);
            if (auto sp = find_live(s, h, op, dtype, srcs, arg)) return UOp(std::move(sp));
        }
        // Build outside the lock: bounds and allocation need no table access.
        auto [lo, hi] = compute_bounds(op, dtype, srcs, arg);
        std::optional<Shape> shape = infer_shape(op, srcs, arg);
        auto* n = new UOpNode;
        n->op = op;
        n->dtype = dtype;
        n->srcs = std::move(srcs);
        n->arg = std::move(arg);
        n->hash = h;
        n->vmin = lo;
        n->vmax = hi;
        const std::source_location* site = call_site();
        n->loc = site != nullptr ? *site : loc;
        n->shape = std::move(shape);
        std::shared_ptr<const UOpNode> sp(n, free_node);
        table().live.fetch_add(1, std::memory_order_relaxed); // balanced in free_node
        std::lock_guard<std::mutex> lock(s.mu);
        // Another thread may have built the same node meanwhile: use that one. Ours was never
        // linked; its deleter finds nothing to unlink.
        if (auto other = find_live(s, h, n->op, n->dtype, n->srcs, n->arg))
            return UOp(std::move(other));
        n->id = table().next_id.fetch_add(1, std::memory_order_relaxed);
        s.insert(n);
        return UOp(std::move(sp));
    }
};

size_t live_uop_count() { return table().live.load(); }

UOp UOp::make(Op op, DType dtype, std::vector<UOp> srcs, Arg arg, std::source_location loc) {
    if (!arity_ok(op, srcs.size())) {
        const auto& info = op_info(op);
        fail("uop", std::string(info.name) + " takes " +
                        (info.arity == kVariadic ? "at least " + std::to_string(info.min_arity)
                                                 : std::to_string(info.arity)) +
                        " sources, got " + std::to_string(srcs.size()));
    }
    for (const UOp& s : srcs)
        if (s.is_null()) fail("uop", std::string(op_name(op)) + " given a null source");
    if (!arg_fits(op_info(op).arg, arg))
        fail("uop", std::string(op_name(op)) + " takes " + arg_kind_name(op_info(op).arg) +
                        " as its arg, got " + arg_alternative_name(arg));
    if (op == Op::Gep) { // one lane of the result per listed lane of the source
        const auto& lanes = std::get<std::vector<int64_t>>(arg);
        const int64_t n = srcs[0].dtype().count;
        bool ok = lanes.size() == dtype.count && !lanes.empty() &&
                  dtype.scalar == srcs[0].dtype().scalar && !dtype.is_ptr;
        for (int64_t l : lanes) ok = ok && l >= 0 && l < n;
        if (!ok)
            fail("uop", "GEP of lanes " + arg_to_string(arg) + " of a " + srcs[0].dtype().name() +
                            " cannot be a " + dtype.name());
    }
    return UOpFactory::intern(op, dtype, std::move(srcs), std::move(arg), loc);
}

UOp UOp::variable(std::string name, int64_t min, int64_t max, std::source_location loc) {
    if (min > max)
        fail("variable",
             "'" + name + "' has min " + std::to_string(min) + " > max " + std::to_string(max));
    return make(Op::DefineVar, DType::Index, {}, VarArg{std::move(name), min, max}, loc);
}
UOp UOp::index(int64_t value, std::source_location loc) {
    return make(Op::Const, DType::Index, {}, value, loc);
}
UOp UOp::boolean(bool value, std::source_location loc) {
    return make(Op::Const, DType::Bool, {}, value, loc);
}
UOp UOp::sink(std::vector<UOp> srcs, std::source_location loc) {
    return make(Op::Sink, DType::Void, std::move(srcs), {}, loc);
}
UOp UOp::constant(DType dtype, int64_t value, std::source_location loc) {
    if (dtype.is_bool()) return make(Op::Const, dtype, {}, value != 0, loc);
    if (dtype.is_float()) return make(Op::Const, dtype, {}, static_cast<double>(value), loc);
    if (!dtype.is_int()) fail("const", "no integer constant of dtype " + dtype.name());
    return make(Op::Const, dtype, {}, wrap_to(dtype, value), loc);
}
UOp UOp::constant_f(DType dtype, double value, std::source_location loc) {
    if (!dtype.is_float()) return constant(dtype, static_cast<int64_t>(value), loc);
    return make(Op::Const, dtype, {}, value, loc);
}

UOp UOp::alu(Op op, std::vector<UOp> srcs, std::source_location loc) {
    if (!is_alu(op)) fail("alu", std::string(op_name(op)) + " is not an ALU op");
    if (!arity_ok(op, srcs.size()))
        fail("alu", std::string(op_name(op)) + " takes " + std::to_string(op_info(op).arity) +
                        " sources, got " + std::to_string(srcs.size()));
    DType dt = is_comparison(op) ? DType::Bool.vec(srcs[0].dtype().count)
               : op == Op::Where ? srcs[1].dtype()
                                 : srcs[0].dtype();
    return make(op, dt, std::move(srcs), {}, loc);
}

int64_t UOp::const_value() const {
    if (op() != Op::Const)
        fail("const_value", "node is " + std::string(op_name(op())) + ", not CONST");
    if (auto* i = std::get_if<int64_t>(&arg())) return *i;
    if (auto* b = std::get_if<bool>(&arg())) return *b ? 1 : 0;
    fail("const_value", "CONST of dtype " + dtype().name() + " is not an integer");
}

UOp UOp::const_like(int64_t value) const { return constant(dtype(), value, location()); }

UOp UOp::replace_srcs(std::vector<UOp> srcs) const {
    return make(op(), dtype(), std::move(srcs), arg(), location());
}

namespace {

// The set of nodes a walk has seen: open addressing over raw pointers, no allocation per node
// (toposort and node_count run on every realize and every simplify call).
class SeenSet {
  public:
    // Whether n was not in the set (it is now).
    bool insert(const UOpNode* n) {
        if ((count_ + 1) * 2 > table_.size()) grow();
        for (size_t i = slot_of(n);; ++i) {
            const UOpNode*& slot = table_[i & (table_.size() - 1)];
            if (slot == n) return false;
            if (slot == nullptr) {
                slot = n;
                ++count_;
                return true;
            }
        }
    }
    size_t size() const { return count_; }

  private:
    static size_t slot_of(const UOpNode* n) {
        return static_cast<size_t>(
            ((reinterpret_cast<uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ull) >> 32);
    }
    void grow() {
        std::vector<const UOpNode*> old(table_.size() * 2, nullptr);
        old.swap(table_);
        count_ = 0;
        for (const UOpNode* q : old)
            if (q != nullptr) insert(q);
    }
    std::vector<const UOpNode*> table_ = std::vector<const UOpNode*>(64, nullptr);
    size_t count_ = 0;
};

} // namespace

std::vector<UOp> UOp::toposort() const {
    std::vector<UOp> out;
    SeenSet seen;
    // Iterative post-order DFS: (node, next child index).
    std::vector<std::pair<const UOp*, size_t>> stack;
    stack.emplace_back(this, 0);
    seen.insert(get());
    while (!stack.empty()) {
        auto& [u, i] = stack.back();
        if (i < u->srcs().size()) {
            const UOp& c = u->src(i++);
            if (seen.insert(c.get())) stack.emplace_back(&c, 0);
        } else {
            out.push_back(*u);
            stack.pop_back();
        }
    }
    return out;
}

size_t UOp::node_count() const {
    // The same walk as toposort's, in any order and without copying a UOp per node.
    if (is_null()) return 0;
    SeenSet seen;
    std::vector<const UOp*> stack{this};
    seen.insert(get());
    while (!stack.empty()) {
        const UOp* u = stack.back();
        stack.pop_back();
        for (const UOp& c : u->srcs())
            if (seen.insert(c.get())) stack.push_back(&c);
    }
    return seen.size();
}

UOp with_srcs(const UOp& u, std::vector<UOp> srcs) {
    bool same = srcs.size() == u.srcs().size();
    for (size_t i = 0; i < srcs.size() && same; ++i) same = srcs[i].same(u.src(i));
    return same ? u : u.replace_srcs(std::move(srcs));
}

namespace {

template <class T>
void put(std::string& k, const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    k.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void put_str(std::string& k, const std::string& s) {
    put(k, s.size());
    k += s;
}

void put_arg(std::string& k, const Arg& a) {
    put(k, static_cast<uint8_t>(a.index()));
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::monostate>) {
            } else if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double> ||
                                 std::is_same_v<T, bool> || std::is_same_v<T, Op>) {
                put(k, v); // a double by its bits: -0.0 and NaN payloads stay distinct
            } else if constexpr (std::is_same_v<T, std::string>) {
                put_str(k, v);
            } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
                put(k, v.size());
                for (int64_t x : v) put(k, x);
            } else if constexpr (std::is_same_v<T, VarArg>) {
                put_str(k, v.name);
                put(k, v.min);
                put(k, v.max);
            } else if constexpr (std::is_same_v<T, RangeArg>) {
                put(k, v.axis_id);
                put(k, v.type);
            } else if constexpr (std::is_same_v<T, ReduceArg>) {
                put(k, v.op);
                put(k, v.axes.size());
                for (int64_t x : v.axes) put(k, x);
            } else {
                put_str(k, arg_to_string(Arg(v))); // any later alternative
            }
        },
        a);
}

} // namespace

std::string structure_key(const std::vector<UOp>& nodes, const std::string& where,
                          const std::function<bool(const UOp&, std::string&)>& arg_key) {
    std::string k;
    k.reserve(nodes.size() * 32);
    std::unordered_map<const UOpNode*, uint32_t> pos;
    pos.reserve(nodes.size());
    for (size_t i = 0; i < nodes.size(); ++i) {
        const UOp& u = nodes[i];
        if (u.is_null())
            fail(where, "position " + std::to_string(i) + ": a null UOp in the program");
        const DType dt = u.dtype(); // field by field: DType has padding bytes
        put(k, u.op());
        put(k, dt.scalar);
        put(k, dt.count);
        put(k, dt.is_ptr);
        put(k, dt.addrspace);
        if (!arg_key || !arg_key(u, k)) put_arg(k, u.arg());
        put(k, static_cast<uint32_t>(u.srcs().size()));
        for (size_t s = 0; s < u.srcs().size(); ++s) {
            auto it = pos.find(u.src(s).get());
            if (it == pos.end())
                fail(where, "position " + std::to_string(i) + ": source " + std::to_string(s) +
                                " of " + std::string(op_name(u.op())) + " of dtype " + dt.name() +
                                " (" + std::string(op_name(u.src(s).op())) +
                                ") does not precede it in the program");
            put(k, it->second);
        }
        pos[u.get()] = static_cast<uint32_t>(i);
    }
    return k;
}

UOp UOp::substitute(const std::unordered_map<const UOpNode*, UOp>& map) const {
    std::unordered_map<const UOpNode*, UOp> done;
    for (const UOp& u : toposort()) {
        if (auto it = map.find(u.get()); it != map.end()) {
            done.emplace(u.get(), it->second);
            continue;
        }
        bool changed = false;
        std::vector<UOp> srcs;
        srcs.reserve(u.srcs().size());
        for (const UOp& s : u.srcs()) {
            const UOp& n = done.at(s.get());
            changed |= !n.same(s);
            srcs.push_back(n);
        }
        done.emplace(u.get(), changed ? u.replace_srcs(std::move(srcs)) : u);
    }
    return done.at(get());
}

namespace {

uint64_t double_bits(double d) {
    uint64_t b;
    std::memcpy(&b, &d, sizeof b);
    return b;
}

// Compares the node-local parts (op, dtype, arg, arity); the sources are the caller's.
int compare_local(const UOp& a, const UOp& b) {
    if (a.op() != b.op()) return a.op() < b.op() ? -1 : 1;
    if (!(a.dtype() == b.dtype())) {
        auto key = [](DType d) {
            return std::tuple(static_cast<int>(d.scalar), d.count, d.is_ptr,
                              static_cast<int>(d.addrspace));
        };
        return key(a.dtype()) < key(b.dtype()) ? -1 : 1;
    }
    const Arg& x = a.arg();
    const Arg& y = b.arg();
    if (x.index() != y.index()) return x.index() < y.index() ? -1 : 1;
    if (auto* va = std::get_if<VarArg>(&x)) {
        const auto& vb = std::get<VarArg>(y);
        if (*va == vb) return 0;
        return std::tie(va->name, va->min, va->max) < std::tie(vb.name, vb.min, vb.max) ? -1 : 1;
    }
    if (auto* ia = std::get_if<int64_t>(&x)) {
        int64_t ib = std::get<int64_t>(y);
        return *ia == ib ? 0 : *ia < ib ? -1 : 1;
    }
    if (auto* da = std::get_if<double>(&x)) {
        // By value where ordered, then by bits (NaN, -0.0): a total order consistent with same().
        double db = std::get<double>(y);
        if (*da < db) return -1;
        if (db < *da) return 1;
        uint64_t ba = double_bits(*da), bb = double_bits(db);
        return ba == bb ? 0 : ba < bb ? -1 : 1;
    }
    if (x != y) return arg_to_string(x) < arg_to_string(y) ? -1 : 1;
    if (a.srcs().size() != b.srcs().size()) return a.srcs().size() < b.srcs().size() ? -1 : 1;
    return 0;
}

} // namespace

int compare_structural(const UOp& a, const UOp& b) {
    // Iterative, depth first over pairs of sources, so deep graphs cannot overflow the stack.
    std::vector<std::pair<const UOp*, const UOp*>> stack{{&a, &b}};
    while (!stack.empty()) {
        auto [x, y] = stack.back();
        stack.pop_back();
        if (x->same(*y)) continue;
        if (int c = compare_local(*x, *y)) return c;
        for (size_t i = x->srcs().size(); i-- > 0;) stack.emplace_back(&x->src(i), &y->src(i));
    }
    return 0; // structurally equal but distinct: impossible with hash-consing
}

// ---- printing ---------------------------------------------------------------------------------

namespace {

// Precedence of infix ops, matching the symbolic grammar (higher binds tighter).
int precedence(Op op) {
    switch (op) {
    case Op::Or: return 1;
    case Op::Xor: return 2;
    case Op::And: return 3;
    case Op::CmpEq:
    case Op::CmpNe: return 4;
    case Op::CmpLt: return 5;
    case Op::Shl:
    case Op::Shr: return 6;
    case Op::Add:
    case Op::Sub: return 7;
    case Op::Mul:
    case Op::Idiv:
    case Op::Fdiv:
    case Op::Mod: return 8;
    default: return 10;
    }
}

std::string const_text(const UOp& u) {
    if (auto* b = std::get_if<bool>(&u.arg())) return *b ? "true" : "false";
    if (auto* i = std::get_if<int64_t>(&u.arg())) return std::to_string(*i);
    if (auto* d = std::get_if<double>(&u.arg())) {
        std::ostringstream os;
        os << *d;
        std::string s = os.str();
        if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
        return s;
    }
    return arg_to_string(u.arg());
}

void render_into(const UOp& u, std::string& out, int depth) {
    if (depth > 200) {
        out += "...";
        return;
    }
    switch (u.op()) {
    case Op::Const: out += const_text(u); return;
    case Op::DefineVar: out += u.arg_as<VarArg>().name; return;
    case Op::Bind:
        render_into(u.src(0), out, depth + 1);
        out += '=' + std::to_string(u.arg_as<int64_t>());
        return;
    case Op::Neg: {
        out += '-';
        bool paren = precedence(u.src(0).op()) < 10 || u.src(0).op() == Op::Neg;
        if (paren) out += '(';
        render_into(u.src(0), out, depth + 1);
        if (paren) out += ')';
        return;
    }
    case Op::Not: {
        out += '!';
        bool paren = precedence(u.src(0).op()) < 10;
        if (paren) out += '(';
        render_into(u.src(0), out, depth + 1);
        if (paren) out += ')';
        return;
    }
    default: break;
    }
    std::string_view sym = op_symbol(u.op());
    if (!sym.empty() && u.srcs().size() == 2) {
        int p = precedence(u.op());
        bool lp = precedence(u.src(0).op()) < p;
        bool rp = precedence(u.src(1).op()) <= p;
        if (lp) out += '(';
        render_into(u.src(0), out, depth + 1);
        if (lp) out += ')';
        out += ' ';
        out += sym;
        out += ' ';
        if (rp) out += '(';
        render_into(u.src(1), out, depth + 1);
        if (rp) out += ')';
        return;
    }
    std::string name;
    switch (u.op()) {
    case Op::Where: name = "where"; break;
    case Op::Max: name = "max"; break;
    default: {
        name = std::string(op_name(u.op()));
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
    }
    }
    out += name;
    out += '(';
    for (size_t i = 0; i < u.srcs().size(); ++i) {
        if (i) out += ", ";
        render_into(u.src(i), out, depth + 1);
    }
    if (u.arg().index() != 0) {
        if (!u.srcs().empty()) out += ", ";
        out += arg_to_string(u.arg());
    }
    out += ')';
}

std::string short_file(const char* f) {
    std::string s = f;
    auto pos = s.find_last_of('/');
    return pos == std::string::npos ? s : s.substr(pos + 1);
}

} // namespace

std::string UOp::render() const {
    std::string out;
    if (is_null()) return "<null>";
    render_into(*this, out, 0);
    return out;
}

namespace {

// A string as the inside of a dot "..." label: quotes and backslashes escaped, long ones cut.
std::string dot_escape(const std::string& s, size_t max = 48) {
    std::string out;
    const bool cut = s.size() > max;
    for (size_t i = 0; i < s.size() && i < max; ++i) {
        const char c = s[i];
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') {
            out += "\\n";
            continue;
        }
        out += c;
    }
    if (cut) out += "...";
    return out;
}

const char* dot_fill(Op op) {
    switch (op_info(op).category) {
    case OpCategory::Const: return "#eeeeee";
    case OpCategory::Define: return "#ffe3a3";
    case OpCategory::Memory: return "#c6e2ff";
    case OpCategory::Movement: return "#e4d2ff";
    case OpCategory::Reduce: return "#ffc9c9";
    case OpCategory::Control: return "#c8f0c8";
    case OpCategory::Vector: return "#d9f2f2";
    case OpCategory::Structure: return "#f2f2f2";
    case OpCategory::Tensor: return "#ffd8b0";
    default: return "#ffffff";
    }
}

} // namespace

std::string UOp::to_dot() const {
    return to_dot([](const UOp&) { return std::string(); });
}

std::string UOp::to_dot(const std::function<std::string(const UOp&)>& node_id,
                        const std::unordered_set<const UOpNode*>& highlight,
                        size_t max_depth) const {
    std::string out = "digraph tempura {\n  node [shape=box style=\"rounded,filled\" "
                      "fontname=\"Helvetica\" fontsize=10 height=0.2];\n"
                      "  edge [fontsize=8 color=\"#666666\"];\n";
    if (is_null()) return out + "}\n";
    // The nodes drawn: all of them (sources first), or those within max_depth edges of this
    // one, breadth first (a node past the edge becomes a "..." leaf of its user).
    std::vector<UOp> order;
    std::unordered_map<const UOpNode*, size_t> index;
    std::vector<bool> cut;
    if (max_depth == SIZE_MAX) {
        order = toposort(); // iterative
        cut.assign(order.size(), false);
        for (size_t i = 0; i < order.size(); ++i) index.emplace(order[i].get(), i);
    } else {
        std::vector<size_t> depth;
        order.push_back(*this);
        depth.push_back(0);
        index.emplace(get(), 0);
        for (size_t i = 0; i < order.size(); ++i) {
            cut.push_back(depth[i] >= max_depth && !order[i].srcs().empty());
            if (cut.back()) continue;
            for (const UOp& s : order[i].srcs())
                if (index.emplace(s.get(), order.size()).second) {
                    order.push_back(s);
                    depth.push_back(depth[i] + 1);
                }
        }
    }
    for (size_t i = 0; i < order.size(); ++i) {
        const UOp& u = order[i];
        std::string label = std::string(op_name(u.op()));
        if (u.dtype() != DType::Void) label += "\n" + u.dtype().name();
        if (u.arg().index() != 0) label += "\n" + arg_to_string(u.arg());
        const std::string id = node_id(u);
        // The last line: where it was built (the user's line for a node a Tensor or nn call made).
        out += "  n" + std::to_string(i) + " [label=\"" + dot_escape(label, 96) + "\\n@" +
               dot_escape(site_string(u.location()), 96) + "\"";
        if (!id.empty()) out += " id=\"" + dot_escape(id) + "\"";
        out += std::string(" fillcolor=\"") +
               (highlight.count(u.get()) ? "#ff6b6b" : dot_fill(u.op())) + "\"";
        if (highlight.count(u.get())) out += " penwidth=2";
        out += "];\n";
        const auto& srcs = u.srcs();
        if (cut[i]) {
            out += "  e" + std::to_string(i) + " [label=\"...\" shape=plaintext style=\"\"];\n  e" +
                   std::to_string(i) + " -> n" + std::to_string(i) + " [style=dashed];\n";
            continue;
        }
        for (size_t k = 0; k < srcs.size(); ++k) {
            out += "  n" + std::to_string(index.at(srcs[k].get())) + " -> n" + std::to_string(i);
            if (srcs.size() > 1) out += " [label=\"" + std::to_string(k) + "\"]";
            out += ";\n";
        }
    }
    return out + "}\n";
}

std::string UOp::tree() const {
    if (is_null()) return "<null>\n";
    std::unordered_map<const UOpNode*, size_t> label;
    std::string out;
    // Iterative pre-order walk: (node, prefix for its children, connector for itself).
    struct Item {
        UOp u;
        std::string prefix;
        std::string connector;
        size_t depth;
    };
    std::vector<Item> stack{{*this, "", "", 0}};
    while (!stack.empty()) {
        Item it = std::move(stack.back());
        stack.pop_back();
        out += it.connector;
        auto found = label.find(it.u.get());
        if (found != label.end()) {
            out += "[" + std::to_string(found->second) + "] " + std::string(op_name(it.u.op())) +
                   " (same as above)\n";
            continue;
        }
        size_t id = label.size();
        label.emplace(it.u.get(), id);
        out += "[" + std::to_string(id) + "] " + std::string(op_name(it.u.op())) + " " +
               it.u.dtype().name();
        if (it.u.arg().index() != 0) out += " " + arg_to_string(it.u.arg());
        out += "  @" + short_file(it.u.location().file_name()) + ":" +
               std::to_string(it.u.location().line()) + "\n";
        const auto& srcs = it.u.srcs();
        // Past kMaxIndent levels the indentation stops growing (a deep chain would otherwise
        // print a quadratic amount of it); the [id] labels still tell the structure.
        constexpr size_t kMaxIndent = 32;
        const bool deep = it.depth >= kMaxIndent;
        for (size_t i = srcs.size(); i-- > 0;) {
            bool last = i + 1 == srcs.size();
            stack.push_back({srcs[i], deep ? it.prefix : it.prefix + (last ? "   " : "│  "),
                             it.prefix + (deep   ? "┊─ "
                                          : last ? "└─ "
                                                 : "├─ "),
                             it.depth + 1});
        }
    }
    return out;
}

// ---- operators --------------------------------------------------------------------------------

namespace {

UOp binary(Op op, const UOp& a, const UOp& b, const std::source_location& loc) {
    if (a.is_null() || b.is_null()) fail(std::string(op_name(op)), "null operand");
    if (!(a.dtype() == b.dtype()))
        fail(std::string(op_name(op)), "operand dtypes differ: " + a.dtype().name() + " and " +
                                           b.dtype().name() + " in " + a.render() + " " +
                                           std::string(op_symbol(op)) + " " + b.render());
    return UOp::alu(op, {a, b}, loc);
}

} // namespace

#define TEMPURA_BINOP(sym, OP)                                                                     \
    UOp operator sym(Here a, const UOp& b) { return binary(Op::OP, a.u, b, a.loc); }               \
    UOp operator sym(Here a, int64_t b) {                                                          \
        return binary(Op::OP, a.u, UOp::constant(a.u.dtype(), b, a.loc), a.loc);                   \
    }                                                                                              \
    UOp operator sym(HereInt a, const UOp& b) {                                                    \
        return binary(Op::OP, UOp::constant(b.dtype(), a.v, a.loc), b, a.loc);                     \
    }
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

#define TEMPURA_EQOP(sym, OP)                                                                      \
    UOp operator sym(const UOp& a, const UOp& b) {                                                 \
        return binary(Op::OP, a, b, std::source_location::current());                              \
    }                                                                                              \
    UOp operator sym(const UOp& a, int64_t b) {                                                    \
        return binary(Op::OP, a, UOp::constant(a.dtype(), b), std::source_location::current());    \
    }                                                                                              \
    UOp operator sym(int64_t a, const UOp& b) {                                                    \
        return binary(Op::OP, UOp::constant(b.dtype(), a), b, std::source_location::current());    \
    }
TEMPURA_EQOP(==, CmpEq)
TEMPURA_EQOP(!=, CmpNe)
#undef TEMPURA_EQOP

UOp operator-(Here a) { return UOp::alu(Op::Neg, {a.u}, a.loc); }
UOp operator!(Here a) {
    if (!a.u.dtype().is_bool()) fail("not", "operand must be bool, got " + a.u.dtype().name());
    return UOp::alu(Op::Not, {a.u}, a.loc);
}

UOp where(const UOp& c, const UOp& t, const UOp& f, std::source_location loc) {
    if (!c.dtype().is_bool()) fail("where", "condition must be bool, got " + c.dtype().name());
    if (!(t.dtype() == f.dtype()))
        fail("where", "branch dtypes differ: " + t.dtype().name() + " and " + f.dtype().name());
    return UOp::alu(Op::Where, {c, t, f}, loc);
}
UOp where(const UOp& c, int64_t t, const UOp& f, std::source_location loc) {
    return where(c, UOp::constant(f.dtype(), t, loc), f, loc);
}
UOp where(const UOp& c, const UOp& t, int64_t f, std::source_location loc) {
    return where(c, t, UOp::constant(t.dtype(), f, loc), loc);
}
UOp maximum(const UOp& a, const UOp& b, std::source_location loc) {
    return binary(Op::Max, a, b, loc);
}
UOp maximum(const UOp& a, int64_t b, std::source_location loc) {
    return binary(Op::Max, a, UOp::constant(a.dtype(), b, loc), loc);
}
UOp maximum(int64_t a, const UOp& b, std::source_location loc) {
    return binary(Op::Max, UOp::constant(b.dtype(), a, loc), b, loc);
}
UOp minimum(const UOp& a, const UOp& b, std::source_location loc) {
    // min(a, b) = -max(-a, -b), the form the symbolic rules know.
    return UOp::alu(Op::Neg,
                    {maximum(UOp::alu(Op::Neg, {a}, loc), UOp::alu(Op::Neg, {b}, loc), loc)}, loc);
}

} // namespace tempura
