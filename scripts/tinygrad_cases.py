#!/usr/bin/env python3
"""Converts tinygrad's symbolic unit tests into tests/data/tinygrad_symbolic.tsv.

    python3 scripts/tinygrad_cases.py <tinygrad>/test/null/test_uop_symbolic.py [commit] \
        > tests/data/tinygrad_symbolic.tsv

Every `self.helper_test_variable(expr, vmin, vmax, "rendered")` of the file is run against a small
stand-in for tinygrad's UOp (no tinygrad needed): the expression and tinygrad's expected form are
built as trees, rendered in our grammar (tests/data/symbolic.tsv's header) and enumerated over the
variables' ranges with C semantics. A case is kept only where every / and % of the expression and of
tinygrad's form has a dividend >= 0 and a divisor > 0 at every point (so tinygrad's floor division
and our truncating division agree), and where tinygrad's form equals the expression at every point.
The skipped cases are counted by reason on stderr (and in the file's header).
"""
import ast
import collections
import sys

MAX_POINTS = 300_000


class Skip(Exception):
    pass


class E:
    """An expression node. op: const, var, neg, add, sub, mul, div, mod, lt, ne, and, or, xor,
    max, where, unsup (a poison carrying the reason)."""

    def __init__(self, op, srcs=(), val=None, dtype="int", name=None, lo=None, hi=None):
        self.op, self.srcs, self.val, self.dtype = op, tuple(srcs), val, dtype
        self.name, self.lo, self.hi = name, lo, hi

    # --- construction -------------------------------------------------------------------------
    @staticmethod
    def lift(x, like=None):
        if isinstance(x, E):
            return x
        if isinstance(x, bool):
            return E("const", val=int(x), dtype="bool")
        if isinstance(x, int):
            return E("const", val=x, dtype="int")
        return unsup("float constant")

    def _bin(self, op, other, swap=False):
        o = E.lift(other)
        a, b = (o, self) if swap else (self, o)
        for s in (a, b):
            if s.op == "unsup":
                return s
        if op == "mul" and a.dtype == "bool" and b.dtype == "bool":
            op = "and"
        if op in ("add", "sub", "mul", "div", "mod") and "bool" in (a.dtype, b.dtype):
            return unsup("arithmetic on bools")
        dt = "bool" if op in ("lt", "ne") or (op in ("and", "or", "xor") and a.dtype == "bool") else a.dtype
        return E(op, (a, b), dtype=dt)

    def __add__(self, o): return self._bin("add", o)
    def __radd__(self, o): return self._bin("add", o, True)
    def __sub__(self, o): return self._bin("sub", o)
    def __rsub__(self, o): return self._bin("sub", o, True)
    def __mul__(self, o): return self._bin("mul", o)
    def __rmul__(self, o): return self._bin("mul", o, True)
    def __floordiv__(self, o): return self._bin("div", o)
    def __rfloordiv__(self, o): return self._bin("div", o, True)
    def __mod__(self, o): return self._bin("mod", o)
    def __rmod__(self, o): return self._bin("mod", o, True)
    def __lt__(self, o): return self._bin("lt", o)
    def __gt__(self, o): return E.lift(o)._bin("lt", self)
    def __le__(self, o): return E.lift(o)._bin("lt", self).logical_not()
    def __ge__(self, o): return self._bin("lt", o).logical_not()
    def __and__(self, o): return self._bin("and", o)
    def __rand__(self, o): return self._bin("and", o, True)
    def __or__(self, o): return self._bin("or", o)
    def __ror__(self, o): return self._bin("or", o, True)
    def __xor__(self, o): return self._bin("xor", o)
    def __rxor__(self, o): return self._bin("xor", o, True)
    def __ne__(self, o): return self._bin("ne", o)
    def __lshift__(self, o): return unsup("shift")
    def __rshift__(self, o): return unsup("shift")
    def __truediv__(self, o): return unsup("float division")
    def __eq__(self, o): return self is o
    def __hash__(self): return id(self)

    def __neg__(self):
        return self if self.op == "unsup" else E("neg", (self,), dtype=self.dtype)

    def ne(self, o): return self._bin("ne", o)
    def logical_not(self): return self._bin("ne", True)
    def maximum(self, o): return self._bin("max", o)
    def minimum(self, o): return -((-self).maximum(-E.lift(o)))
    def ufix(self, x): return E("const", val=int(x), dtype=self.dtype)

    def where(self, t, f):
        t, f = E.lift(t), E.lift(f)
        for s in (self, t, f):
            if s.op == "unsup":
                return s
        return E("where", (self, t, f), dtype=t.dtype)

    def cast(self, dt):
        if self.op == "unsup":
            return self
        if dt == "bool":
            return self if self.dtype == "bool" else self._bin("ne", 0)
        if dt == "int":
            return self.where(1, 0) if self.dtype == "bool" else self
        return unsup("cast to a float dtype")

    def simplify(self): return unsup("UOp API other than simplify of an expression")
    def __getattr__(self, name): return lambda *a, **k: unsup(f"UOp.{name}")


def unsup(why):
    return E("unsup", val=why)


def Variable(name, lo, hi, dtype="int", **_):
    if dtype not in ("int", "bool"):
        return unsup("float variable")
    return E("var", name=name, lo=lo, hi=hi, dtype=dtype)


class _Dtypes:
    weakint = int = int32 = long = index = "int"
    uint32 = uint = "uint"
    bool = "bool"
    float = float32 = half = "float"


class _UOp:
    @staticmethod
    def variable(name, lo, hi, dtype="int", **k):
        return Variable(name, lo, hi, dtype)

    @staticmethod
    def const(v, *a):
        return E.lift(v)

    def __getattr__(self, name):
        return lambda *a, **k: unsup(f"UOp.{name}")


def _uop_attr(name):
    return lambda *a, **k: unsup(f"UOp.{name}")


class _UOpNS:
    variable = staticmethod(_UOp.variable)
    const = staticmethod(_UOp.const)
    range = staticmethod(_uop_attr("range (symbolic loop bound)"))
    gcd = staticmethod(_uop_attr("gcd"))
    invalid = staticmethod(_uop_attr("invalid"))
    param = staticmethod(_uop_attr("param"))


# --- rendering in our grammar ------------------------------------------------------------------
PREC = {"or": 1, "xor": 2, "and": 3, "ne": 4, "lt": 5, "add": 6, "sub": 6, "mul": 7, "div": 7, "mod": 7}
SYM = {"or": "|", "xor": "^", "and": "&", "ne": "!=", "lt": "<", "add": "+", "sub": "-", "mul": "*",
       "div": "/", "mod": "%"}


def render(e, need=0):
    if e.op == "const":
        if e.dtype == "bool":
            return "true" if e.val else "false"
        s, p = str(e.val), (8 if e.val < 0 else 9)
    elif e.op == "var":
        s, p = e.name, 9
    elif e.op == "neg":
        s, p = "-" + render(e.srcs[0], 8), 8
    elif e.op == "max":
        s, p = f"max({render(e.srcs[0])}, {render(e.srcs[1])})", 9
    elif e.op == "where":
        s, p = "where(" + ", ".join(render(x) for x in e.srcs) + ")", 9
    else:
        # Comparisons under != and the logic ops get parentheses for the reader (not the parser).
        p = PREC[e.op]
        q = PREC["lt"] + 1 if e.op in ("ne", "and", "or", "xor") else 0
        s = f"{render(e.srcs[0], max(p, q))} {SYM[e.op]} {render(e.srcs[1], max(p + 1, q))}"
    return f"({s})" if p < need else s


def node_count(e):
    """Distinct nodes of the tree as a DAG: equal subtrees (equal constants, the same variable)
    count once, as in UOp::node_count on hash-consed UOps."""
    seen = set()

    def key(x):
        if x.op == "const":
            k = ("const", x.dtype, x.val)
        elif x.op == "var":
            k = ("var", x.name)
        else:
            k = (x.op,) + tuple(key(s) for s in x.srcs)
        seen.add(k)
        return k

    key(e)
    return len(seen)


def variables(e, out):
    if e.op == "var":
        prev = out.get(e.name)
        if prev is not None and (prev.lo, prev.hi) != (e.lo, e.hi):
            raise Skip("one name, two ranges")
        out[e.name] = e
    for s in e.srcs:
        variables(s, out)
    return out


# --- evaluation: C semantics, and a check that floor semantics would agree -----------------------
class Neg(Exception):
    pass


def evaluate(e, env):
    op = e.op
    if op == "const":
        return e.val
    if op == "var":
        return env[e.name]
    v = [evaluate(s, env) for s in e.srcs] if op != "where" else None
    if op == "neg": return -v[0]
    if op == "add": return v[0] + v[1]
    if op == "sub": return v[0] - v[1]
    if op == "mul": return v[0] * v[1]
    if op in ("div", "mod"):
        a, b = v
        if a < 0 or b <= 0:
            raise Neg()
        return a // b if op == "div" else a % b
    if op == "lt": return int(v[0] < v[1])
    if op == "ne": return int(v[0] != v[1])
    if op == "and": return v[0] & v[1]
    if op == "or": return v[0] | v[1]
    if op == "xor": return v[0] ^ v[1]
    if op == "max": return max(v)
    if op == "where":
        return evaluate(e.srcs[1], env) if evaluate(e.srcs[0], env) else evaluate(e.srcs[2], env)
    raise AssertionError(op)


def has_divmod(e):
    return e.op in ("div", "mod") or any(has_divmod(s) for s in e.srcs)


def walk(e):
    yield e
    for s in e.srcs:
        yield from walk(s)


def assignments(vs):
    import itertools
    names = [v.name for v in vs]
    for vals in itertools.product(*[range(v.lo, v.hi + 1) for v in vs]):
        yield dict(zip(names, vals))


# --- running the test file ------------------------------------------------------------------------
class Recorder:
    def __init__(self):
        self.calls = []
        self.other = 0

    def helper_test_variable(self, v, n, m, s, test_z3=True):
        self.calls.append((v, n, m, s))

    def __getattr__(self, name):
        if name.startswith("assert") or name.startswith("check"):
            def other(*a, **k):
                self.other += 1
                return _Ctx()
            return other
        raise AttributeError(name)


class _Ctx:
    def __enter__(self): return self
    def __exit__(self, *a): return True


def methods(path):
    tree = ast.parse(open(path).read())
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef):
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name.startswith("test"):
                    expected_failure = any(ast.unparse(d).endswith("expectedFailure") for d in fn.decorator_list)
                    yield cls.name, fn, expected_failure


def convert(path):
    env_base = {"Variable": Variable, "dtypes": _Dtypes, "UOp": _UOpNS, "uconst": E.lift,
                "usum": lambda xs: __import__("functools").reduce(lambda x, y: x + y, xs),
                "uand": lambda xs: __import__("functools").reduce(lambda x, y: x * y, xs),
                "math": __import__("math"), "Ops": None, "Invalid": None}
    rows, skipped, other_asserts = [], collections.Counter(), 0
    for cls, fn, expected_failure in methods(path):
        rec = Recorder()
        mod = ast.Module(body=fn.body, type_ignores=[])
        env = dict(env_base, self=rec)
        try:
            exec(compile(mod, path, "exec"), env)
        except Exception:  # noqa: BLE001 - a method using what the stand-in lacks
            pass
        written = sum(1 for x in ast.walk(fn) if isinstance(x, ast.Call)
                      and ast.unparse(x.func) == "self.helper_test_variable")
        if written > len(rec.calls):
            skipped["the test builds what the stand-in lacks (bitcast, valid, ...)"] += written - len(rec.calls)
        other_asserts += rec.other
        if expected_failure:
            skipped["an expectedFailure test (tinygrad does not pass it)"] += len(rec.calls)
            continue
        for i, (v, n, m, s) in enumerate(rec.calls, 1):
            name = f"{fn.name}_{i}"
            try:
                rows.append(case(name, v, n, m, s))
            except Skip as why:
                skipped[str(why)] += 1
    return rows, skipped, other_asserts


def case(name, v, n, m, s):
    if v.op == "unsup":
        raise Skip(f"uses what our grammar lacks: {v.val}")
    vs = variables(v, {})
    try:
        ref = eval(s, {k: x for k, x in vs.items()})
    except Exception:  # noqa: BLE001
        raise Skip("tinygrad's form names what the expression lacks (ranges, specials)")
    ref = E.lift(ref) if not isinstance(ref, E) else ref
    if ref.op == "unsup":
        raise Skip(f"tinygrad's form uses what our grammar lacks: {ref.val}")
    variables(ref, dict(vs))
    for x in list(walk(v)) + list(walk(ref)):
        if x.op == "const" and not (-2**62 < x.val < 2**62):
            raise Skip("constants near the int64 limits")
    order = list(vs.values())
    points = 1
    for x in order:
        points *= x.hi - x.lo + 1
    if points > MAX_POINTS:
        raise Skip(f"more than {MAX_POINTS} points to enumerate")
    lo, hi = None, None
    for a in assignments(order):
        try:
            ve = evaluate(v, a)
        except Neg:
            raise Skip("a / or % of the expression sees a negative operand (floor != C)")
        try:
            vr = evaluate(ref, a)
        except Neg:
            raise Skip("tinygrad's form divides a negative operand (floor != C)")
        if ve != vr:
            raise Skip("tinygrad's form differs from the expression (stand-in mismatch)")
        lo = ve if lo is None else min(lo, ve)
        hi = ve if hi is None else max(hi, ve)
    n, m = int(n), int(m)
    if not (n <= lo and hi <= m):
        raise Skip("tinygrad's bounds are not sound here")
    var_text = " ".join(f"{x.name}={x.lo}..{x.hi}" for x in order)
    return [name, var_text, render(v), str(lo), str(hi), str(n), str(m), str(node_count(ref)), render(ref)]


def main():
    path = sys.argv[1]
    at = f" at commit {sys.argv[2]}" if len(sys.argv) > 2 else ""
    rows, skipped, other = convert(path)
    total_skipped = sum(skipped.values())
    print(f"# Symbolic cases derived from tinygrad's test/null/test_uop_symbolic.py{at} (tinygrad, MIT license,")
    print("#   Copyright (c) 2024 the tiny corp): every self.helper_test_variable(expr, vmin, vmax, form) there,")
    print("#   converted by scripts/tinygrad_cases.py. bound_min/bound_max are tinygrad's expected vmin/vmax,")
    print("#   max_nodes the node count of tinygrad's expected form (reference), true_min/true_max enumerated.")
    print("# Restriction: kept only where every / and % (of expr and of tinygrad's form) has a dividend >= 0 and")
    print("#   a divisor > 0 at every point, so tinygrad's floor division and our C division agree.")
    print(f"# {len(rows)} cases kept, {total_skipped} skipped:")
    for why, k in sorted(skipped.items(), key=lambda kv: -kv[1]):
        if k:
            print(f"#   {k:3d} {why}")
    print("# Same grammar and meaning as symbolic.tsv (see its header); max_nodes and bounds are tinygrad's, so")
    print("#   a case below them is one where we are weaker than tinygrad (test_tinygrad_cases.cpp counts them).")
    print("\t".join(["name", "vars", "expr", "true_min", "true_max", "bound_min", "bound_max", "max_nodes",
                     "reference"]))
    for r in rows:
        print("\t".join(r))
    print(f"kept {len(rows)}, skipped {total_skipped}, other assertions {other}", file=sys.stderr)
    for why, k in sorted(skipped.items(), key=lambda kv: -kv[1]):
        print(f"  {k:3d} {why}", file=sys.stderr)


if __name__ == "__main__":
    main()
