// Printing of rule terms, and the op-indexed rule table.
#include <algorithm>
#include <cctype>
#include <numeric>
#include <utility>
#include <vector>

#include "tempura/error.hpp"
#include "tempura/pattern/table.hpp"

namespace tempura::pattern {

void RewriteContext::throw_bad(const std::type_info& want, const std::type_info* have) {
    fail("rewrite", std::string("a rule asked for a context of type ") + want.name() + " but " +
                        (have ? std::string("graph_rewrite was given one of type ") + have->name()
                              : std::string("graph_rewrite was given none")));
}

namespace {
bool is_infix(const Term& t) {
    return t.kind == Term::Kind::Node && !op_symbol(t.op).empty() && t.children.size() == 2;
}
} // namespace

bool is_multiple_of(const UOp& u, int64_t k) {
    if (k == 0 || !u.dtype().is_int()) return false;
    // A sum, difference or negation of multiples; a product with a constant c, where the other
    // factor is a multiple of k / gcd(k, c); a shift by a constant (x << c is x * 2^c); a WHERE
    // of two multiples; a widened multiple. Each node is visited with the multiple it must be.
    // Magnitudes as unsigned: |INT64_MIN| is 2^63.
    const auto magnitude = [](int64_t v) {
        return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    };
    std::vector<std::pair<const UOp*, uint64_t>> stack{{&u, magnitude(k)}};
    // x * c is a multiple of m when x is one of m / gcd(m, c) (c = 0: always).
    const auto times = [&](const UOp& x, int64_t c, uint64_t m) {
        const uint64_t rest = m / std::gcd(m, magnitude(c));
        if (rest != 1) stack.emplace_back(&x, rest);
    };
    while (!stack.empty()) {
        const auto [node, m] = stack.back();
        stack.pop_back();
        if (m == 1) continue;
        const UOp& n = *node;
        switch (n.op()) {
        case Op::Const:
            if (magnitude(n.const_value()) % m != 0) return false;
            break;
        case Op::Add:
        case Op::Sub:
            stack.emplace_back(&n.src(0), m);
            stack.emplace_back(&n.src(1), m);
            break;
        case Op::Neg: stack.emplace_back(&n.src(0), m); break;
        case Op::Mul:
            if (n.src(1).is_const())
                times(n.src(0), n.src(1).const_value(), m);
            else if (n.src(0).is_const())
                times(n.src(1), n.src(0).const_value(), m);
            else
                return false;
            break;
        case Op::Shl: {
            if (!n.src(1).is_const()) return false;
            const int64_t c = n.src(1).const_value();
            if (c < 0 || c > 62) return false;
            times(n.src(0), int64_t{1} << c, m);
            break;
        }
        case Op::Where:
            stack.emplace_back(&n.src(1), m);
            stack.emplace_back(&n.src(2), m);
            break;
        case Op::Cast: // a widening cast keeps the value
            if (!n.src(0).dtype().is_int() || n.src(0).dtype().itemsize() > n.dtype().itemsize())
                return false;
            stack.emplace_back(&n.src(0), m);
            break;
        default: return false;
        }
    }
    return true;
}

std::string to_string(const Term& t) {
    switch (t.kind) {
    case Term::Kind::Wildcard:
    case Term::Kind::ConstWildcard: return t.name;
    case Term::Kind::Literal: return std::to_string(t.value);
    case Term::Kind::Code: return t.name.empty() || t.name == "code" ? "<code>" : t.name;
    case Term::Kind::OpSet: {
        if (t.children.empty()) return t.name; // alu_any
        std::string s = t.name + "(";
        for (size_t i = 0; i < t.children.size(); ++i)
            s += (i ? ", " : "") + to_string(t.children[i]);
        return s + ")";
    }
    case Term::Kind::Fold:
        return (t.name.empty() ? std::string("fold") : t.name) + "(" + to_string(t.children.at(0)) +
               ")";
    case Term::Kind::Predicate: {
        if (t.name == "and") return to_string(t.children[0]) + " && " + to_string(t.children[1]);
        if (t.name == "<=" || t.name == ">" || t.name == ">=")
            return to_string(t.children[0]) + " " + t.name + " " + to_string(t.children[1]);
        std::string s = t.name + "(";
        for (size_t i = 0; i < t.children.size(); ++i)
            s += (i ? ", " : "") + to_string(t.children[i]);
        return s + ")";
    }
    case Term::Kind::Node: {
        auto child = [&](const Term& c) {
            // Appended piecewise: g++ 12 warns falsely (-Wrestrict) on "(" + std::string.
            std::string s;
            if (is_infix(c)) s += '(';
            s += to_string(c);
            if (is_infix(c)) s += ')';
            return s;
        };
        if (is_infix(t))
            return child(t.children[0]) + " " + std::string(op_symbol(t.op)) + " " +
                   child(t.children[1]);
        if (t.op == Op::Neg || t.op == Op::Not) {
            // -(-x), not --x: a unary operand of a unary op is parenthesized, as render() does.
            const Term& c = t.children.at(0);
            const bool unary = c.kind == Term::Kind::Node && (c.op == Op::Neg || c.op == Op::Not);
            std::string s(t.op == Op::Neg ? "-" : "!");
            if (unary) s += '(';
            s += child(c);
            if (unary) s += ')';
            return s;
        }
        std::string name = t.op == Op::Max ? "maximum" : std::string(op_name(t.op));
        if (t.op != Op::Max) std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        std::string s = name + "(";
        for (size_t i = 0; i < t.children.size(); ++i)
            s += (i ? ", " : "") + to_string(t.children[i]);
        return s + ")";
    }
    }
    return "?";
}

std::string CompiledRule::text() const {
    RuleTerms t = terms(rule);
    std::string s = to_string(t.lhs) + " -> " + to_string(t.rhs);
    if (!(t.pred.kind == Term::Kind::Predicate && t.pred.name == "true"))
        s += " if " + to_string(t.pred);
    if (label) s = std::string(label) + ": " + s;
    return s;
}

std::string RuleTable::dump() const {
    std::string s;
    for (const RuleTable* t = this; t != nullptr; t = t->next_)
        for (const auto& r : t->all()) s += r.text() + "\n";
    return s;
}

} // namespace tempura::pattern
