#pragma once
// A small recursive-descent parser for the expression grammar of shared/cases/symbolic.tsv.
//
// Grammar, lowest precedence first (as the tsv header states):
//   expr   := xor ('|' xor)*
//   xor    := and ('^' and)*
//   and    := eq ('&' eq)*
//   eq     := lt (('==' | '!=') lt)*
//   lt     := add ('<' add)*
//   add    := mul (('+' | '-') mul)*
//   mul    := unary (('*' | '/' | '%') unary)*
//   unary  := '-' unary | atom
//   atom   := integer | 'true' | 'false' | name | 'where' '(' expr ',' expr ',' expr ')'
//           | 'max' '(' expr ',' expr ')' | '(' expr ')'
// Every operator is left-associative. An integer literal is unsigned; "-7" is unary minus applied
// to 7, so the parser builds exactly what the text says and leaves all folding to simplify().
//
// Variable lists ("x=0..10 y=-5..5", space separated, bounds inclusive) are parsed by parse_vars().
// Malformed input throws std::runtime_error naming the position and the offending text.
#include <cctype>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tempura/tempura.hpp>

namespace tempura_test {

struct VarSpec {
    std::string name;
    int64_t min = 0;
    int64_t max = 0;
};

namespace detail {

inline bool is_name_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
inline bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

class Parser {
  public:
    Parser(std::string text, const std::map<std::string, tempura::UOp>& vars)
        : text_(std::move(text)), vars_(vars) {}

    tempura::UOp parse_all() {
        tempura::UOp e = parse_or();
        skip_space();
        if (pos_ != text_.size()) error("unexpected trailing input");
        return e;
    }

  private:
    std::string text_;
    const std::map<std::string, tempura::UOp>& vars_;
    size_t pos_ = 0;

    [[noreturn]] void error(const std::string& what) const {
        std::string near = text_.substr(pos_, 16);
        throw std::runtime_error("expr parse error at position " + std::to_string(pos_) +
                                 " (near '" + near + "'): " + what + " in \"" + text_ + "\"");
    }

    void skip_space() {
        while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    }

    // Consumes `tok` if it is next (after spaces). A one-character operator is not taken when it is
    // the first character of a two-character operator that starts here ("=" of "==", "!" of "!=").
    bool accept(const char* tok) {
        skip_space();
        size_t n = std::char_traits<char>::length(tok);
        if (text_.compare(pos_, n, tok) != 0) return false;
        pos_ += n;
        return true;
    }

    void expect(const char* tok) {
        if (!accept(tok)) error(std::string("expected '") + tok + "'");
    }

    tempura::UOp parse_or() {
        tempura::UOp l = parse_xor();
        while (accept("|")) l = l | parse_xor();
        return l;
    }
    tempura::UOp parse_xor() {
        tempura::UOp l = parse_and();
        while (accept("^")) l = l ^ parse_and();
        return l;
    }
    tempura::UOp parse_and() {
        tempura::UOp l = parse_eq();
        while (accept("&")) l = l & parse_eq();
        return l;
    }
    tempura::UOp parse_eq() {
        tempura::UOp l = parse_lt();
        for (;;) {
            if (accept("==")) {
                l = (l == parse_lt());
            } else if (accept("!=")) {
                l = (l != parse_lt());
            } else {
                return l;
            }
        }
    }
    tempura::UOp parse_lt() {
        tempura::UOp l = parse_add();
        while (accept("<")) l = l < parse_add();
        return l;
    }
    tempura::UOp parse_add() {
        tempura::UOp l = parse_mul();
        for (;;) {
            if (accept("+")) {
                l = l + parse_mul();
            } else if (accept("-")) {
                l = l - parse_mul();
            } else {
                return l;
            }
        }
    }
    tempura::UOp parse_mul() {
        tempura::UOp l = parse_unary();
        for (;;) {
            if (accept("*")) {
                l = l * parse_unary();
            } else if (accept("/")) {
                l = l / parse_unary();
            } else if (accept("%")) {
                l = l % parse_unary();
            } else {
                return l;
            }
        }
    }
    tempura::UOp parse_unary() {
        if (accept("-")) return -parse_unary();
        return parse_atom();
    }

    std::string parse_name() {
        skip_space();
        size_t start = pos_;
        if (pos_ >= text_.size() || !is_name_start(text_[pos_])) error("expected a name");
        while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
        return text_.substr(start, pos_ - start);
    }

    tempura::UOp parse_atom() {
        skip_space();
        if (pos_ >= text_.size()) error("unexpected end of input, expected an operand");
        char c = text_[pos_];
        if (c == '(') {
            ++pos_;
            tempura::UOp e = parse_or();
            expect(")");
            return e;
        }
        if (std::isdigit(static_cast<unsigned char>(c))) {
            size_t start = pos_;
            int64_t v = 0;
            while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
                int d = text_[pos_] - '0';
                if (v > (INT64_MAX - d) / 10) {
                    pos_ = start;
                    error("integer literal out of range");
                }
                v = v * 10 + d;
                ++pos_;
            }
            if (pos_ < text_.size() && is_name_char(text_[pos_]))
                error("malformed integer literal");
            return tempura::UOp::index(v);
        }
        if (is_name_start(c)) {
            size_t start = pos_;
            std::string name = parse_name();
            if (name == "true") return tempura::UOp::boolean(true);
            if (name == "false") return tempura::UOp::boolean(false);
            skip_space();
            bool call = pos_ < text_.size() && text_[pos_] == '(';
            if (name == "where" && call) {
                expect("(");
                tempura::UOp cond = parse_or();
                expect(",");
                tempura::UOp t = parse_or();
                expect(",");
                tempura::UOp f = parse_or();
                expect(")");
                return tempura::where(cond, t, f);
            }
            if (name == "max" && call) {
                expect("(");
                tempura::UOp a = parse_or();
                expect(",");
                tempura::UOp b = parse_or();
                expect(")");
                return tempura::maximum(a, b);
            }
            auto it = vars_.find(name);
            if (it == vars_.end()) {
                pos_ = start;
                error("unknown variable '" + name + "'");
            }
            return it->second;
        }
        error(std::string("unexpected character '") + c + "'");
    }
};

inline int64_t parse_int(const std::string& s, const std::string& whole) {
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
        neg = s[i] == '-';
        ++i;
    }
    if (i >= s.size())
        throw std::runtime_error("var list parse error: expected an integer in '" + whole + "'");
    int64_t v = 0;
    for (; i < s.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(s[i])))
            throw std::runtime_error("var list parse error: bad integer '" + s + "' in '" + whole +
                                     "'");
        int d = s[i] - '0';
        if (v > (INT64_MAX - d) / 10)
            throw std::runtime_error("var list parse error: integer out of range '" + s + "' in '" +
                                     whole + "'");
        v = v * 10 + d;
    }
    return neg ? -v : v;
}

} // namespace detail

// Parses "x=0..10 y=-5..5" (space separated, bounds inclusive). An empty or all-space string gives
// {}.
inline std::vector<VarSpec> parse_vars(const std::string& text) {
    std::vector<VarSpec> out;
    size_t pos = 0;
    while (pos < text.size()) {
        while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
        if (pos >= text.size()) break;
        size_t start = pos;
        while (pos < text.size() && !std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
        std::string item = text.substr(start, pos - start);
        auto where_err = [&](const std::string& what) {
            return std::runtime_error("var list parse error at position " + std::to_string(start) +
                                      ": " + what + " in '" + item + "' (whole list: '" + text +
                                      "')");
        };
        size_t eq = item.find('=');
        if (eq == std::string::npos || eq == 0) throw where_err("expected name=min..max");
        std::string name = item.substr(0, eq);
        if (!detail::is_name_start(name[0])) throw where_err("bad variable name");
        for (char c : name)
            if (!detail::is_name_char(c)) throw where_err("bad variable name");
        std::string range = item.substr(eq + 1);
        size_t dots = range.find("..");
        if (dots == std::string::npos) throw where_err("expected min..max");
        VarSpec v;
        v.name = name;
        v.min = detail::parse_int(range.substr(0, dots), text);
        v.max = detail::parse_int(range.substr(dots + 2), text);
        if (v.min > v.max) throw where_err("min > max");
        for (const VarSpec& o : out)
            if (o.name == v.name) throw where_err("duplicate variable '" + v.name + "'");
        out.push_back(v);
    }
    return out;
}

// Builds the UOp variables for a parsed var list.
inline std::map<std::string, tempura::UOp> make_vars(const std::vector<VarSpec>& specs) {
    std::map<std::string, tempura::UOp> vars;
    for (const VarSpec& v : specs)
        vars.emplace(v.name, tempura::UOp::variable(v.name, v.min, v.max));
    return vars;
}

// Parses an expression over the given variables.
inline tempura::UOp parse_expr(const std::string& text,
                               const std::map<std::string, tempura::UOp>& vars) {
    return detail::Parser(text, vars).parse_all();
}

} // namespace tempura_test
