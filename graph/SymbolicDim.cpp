/** \file
 * SymDim's canonical form and its rewrites: like terms merge, products distribute over sums, and
 * a floor division by a constant takes out what divides exactly and folds into an inner floor
 * division by a constant. */
#include "graph/SymbolicDim.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "graph/Error.h"

namespace fusor {

int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

namespace {

/** The shortest decimal text of \p v that reads back as \p v. */
std::string shortest(double v) {
    char buf[40];
    for (int precision = 1; precision <= 17; precision++) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    return buf;
}

/** The shortest text of a float32 scale \p v ("0.7f" for 0.7f), or of a double one with "f"
 * appended: either reads back as \p v. */
std::string shortest_f32(double v) {
    if ((double)(float)v != v) return shortest(v) + "f";
    char buf[40];
    for (int precision = 1; precision <= 9; precision++) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, v);
        if ((double)std::strtof(buf, nullptr) == v) break;
    }
    return std::string(buf) + "f";
}

}  // namespace

SymDim::SymDim(int64_t c) {
    if (c != 0) terms_.push_back(Term{{}, c, ""});
}

SymDim SymDim::atom(std::shared_ptr<const SymAtom> a) {
    SymDim d;
    d.terms_.push_back(Term{{a}, 1, a->text});
    return d;
}

SymDim SymDim::dim(int index, const std::string &name) {
    auto a = std::make_shared<SymAtom>();
    a->kind = SymAtom::Kind::Dim;
    a->index = index;
    a->name = name;
    a->text = name;
    return atom(a);
}

bool SymDim::is_constant() const {
    return terms_.empty() || (terms_.size() == 1 && terms_[0].factors.empty());
}

int64_t SymDim::constant() const {
    return !terms_.empty() && terms_[0].factors.empty() ? terms_[0].coeff : 0;
}

void SymDim::add_term(Term t) {
    if (t.coeff == 0) return;
    auto it = std::lower_bound(terms_.begin(), terms_.end(), t.key, [](const Term &x, const std::string &k) { return x.key < k; });
    if (it != terms_.end() && it->key == t.key) {
        it->coeff += t.coeff;
        if (it->coeff == 0) terms_.erase(it);
        return;
    }
    terms_.insert(it, std::move(t));
}

SymDim operator+(const SymDim &a, const SymDim &b) {
    SymDim r = a;
    for (const SymDim::Term &t : b.terms_) r.add_term(t);
    return r;
}

SymDim operator-(const SymDim &a, const SymDim &b) {
    return a + SymDim(-1) * b;
}

SymDim operator*(const SymDim &a, const SymDim &b) {
    SymDim r;
    for (const SymDim::Term &x : a.terms_) {
        for (const SymDim::Term &y : b.terms_) {
            SymDim::Term t;
            t.coeff = x.coeff * y.coeff;
            t.factors = x.factors;
            t.factors.insert(t.factors.end(), y.factors.begin(), y.factors.end());
            std::sort(t.factors.begin(), t.factors.end(), [](const auto &p, const auto &q) { return p->text < q->text; });
            for (const auto &f : t.factors) t.key += (t.key.empty() ? "" : "*") + f->text;
            r.add_term(std::move(t));
        }
    }
    return r;
}

SymDim SymDim::floor_div_const(const SymDim &a, int64_t c) {
    FUSOR_INTERNAL_ASSERT(c > 0) << "floor division of " << a.text() << " by " << c;
    if (c == 1) return a;
    if (a.is_constant()) return fusor::floor_div(a.constant(), c);
    // a = c*X + R with R's coefficients in [0, c): floor(a/c) = X + floor(R/c)
    SymDim x, r;
    for (const Term &t : a.terms_) {
        int64_t q = fusor::floor_div(t.coeff, c);
        x.add_term(Term{t.factors, q, t.key});
        r.add_term(Term{t.factors, t.coeff - q * c, t.key});
    }
    if (r.is_constant()) return x + fusor::floor_div(r.constant(), c);
    // floor((floor(Q/d) + k) / c) = floor((Q + k*d) / (d*c))
    const Term &last = r.terms_.back();
    bool nested = r.terms_.size() <= 2 && last.coeff == 1 && last.factors.size() == 1 &&
                  last.factors[0]->kind == SymAtom::Kind::FloorDiv && last.factors[0]->b.is_constant();
    if (nested) {
        const SymAtom &inner = *last.factors[0];
        return x + floor_div_const(inner.a + r.constant() * inner.b.constant(), inner.b.constant() * c);
    }
    auto f = std::make_shared<SymAtom>();
    f->kind = SymAtom::Kind::FloorDiv;
    f->a = r;
    f->b = c;
    SymDim numer = r - (c - 1);
    if (numer.constant() == 0) {
        f->text = "ceil(" + grouped(numer) + "/" + std::to_string(c) + ")";
    } else {
        f->text = grouped(r) + "/" + std::to_string(c);
    }
    return x + atom(f);
}

SymDim SymDim::floor_div(const SymDim &a, const SymDim &b) {
    if (b.is_constant()) return floor_div_const(a, b.constant());
    if (a == b) return 1;
    // exact: b is one term whose factors every term of a holds, with a divisible coefficient
    if (b.terms_.size() == 1) {
        const Term &d = b.terms_[0];
        SymDim q;
        bool exact = true;
        for (const Term &t : a.terms_) {
            std::vector<std::shared_ptr<const SymAtom>> rest = t.factors;
            for (const auto &f : d.factors) {
                auto it = std::find_if(rest.begin(), rest.end(), [&](const auto &x) { return x->text == f->text; });
                if (it == rest.end()) {
                    exact = false;
                    break;
                }
                rest.erase(it);
            }
            if (!exact || t.coeff % d.coeff != 0) {
                exact = false;
                break;
            }
            Term out{rest, t.coeff / d.coeff, ""};
            for (const auto &f : rest) out.key += (out.key.empty() ? "" : "*") + f->text;
            q.add_term(std::move(out));
        }
        if (exact) return q;
    }
    auto f = std::make_shared<SymAtom>();
    f->kind = SymAtom::Kind::FloorDiv;
    f->a = a;
    f->b = b;
    f->text = grouped(a) + "/(" + b.text() + ")";
    return atom(f);
}

SymDim SymDim::max(const SymDim &a, const SymDim &b) {
    SymDim d = a - b;
    if (d.is_constant()) return d.constant() >= 0 ? a : b;
    bool swap = b.text() < a.text();
    auto f = std::make_shared<SymAtom>();
    f->kind = SymAtom::Kind::Max;
    f->a = swap ? b : a;
    f->b = swap ? a : b;
    f->text = "max(" + f->a.text() + ", " + f->b.text() + ")";
    return atom(f);
}

SymDim SymDim::min(const SymDim &a, const SymDim &b) {
    return SymDim(-1) * max(SymDim(-1) * a, SymDim(-1) * b);
}

namespace {

int64_t scaled_floor(int64_t a, double scale, bool f32) {
    double p = (double)a * scale;
    return (int64_t)std::floor(f32 ? (double)(float)p : p);
}

}  // namespace

SymDim SymDim::scale_floor(const SymDim &a, double scale, bool f32) {
    if (a.is_constant()) return scaled_floor(a.constant(), scale, f32);
    // (exact in float32 too for a dim under 2^24: an integer scale, or the inverse of a power of two)
    if (scale == std::floor(scale) && scale < 1e9) return a * (int64_t)scale;
    double inv = 1.0 / scale;
    bool exact = !f32 || (inv == std::floor(inv) && ((int64_t)inv & ((int64_t)inv - 1)) == 0);
    if (inv == std::floor(inv) && inv < 1e9 && 1.0 / inv == scale && exact) return floor_div_const(a, (int64_t)inv);
    auto f = std::make_shared<SymAtom>();
    f->kind = SymAtom::Kind::ScaleFloor;
    f->a = a;
    f->scale = scale;
    f->f32 = f32;
    f->text = "floor(" + grouped(a) + "*" + (f32 ? shortest_f32(scale) : shortest(scale)) + ")";
    return atom(f);
}

std::vector<SymDim::TermView> SymDim::terms() const {
    std::vector<TermView> out;
    for (const Term &t : terms_) out.push_back({t.coeff, t.factors});
    return out;
}

int64_t SymDim::eval(const std::vector<int64_t> &dims) const {
    int64_t sum = 0;
    for (const Term &t : terms_) {
        int64_t v = t.coeff;
        for (const auto &f : t.factors) {
            switch (f->kind) {
            case SymAtom::Kind::Dim: v *= dims.at((size_t)f->index); break;
            case SymAtom::Kind::FloorDiv: v *= fusor::floor_div(f->a.eval(dims), f->b.eval(dims)); break;
            case SymAtom::Kind::Max: v *= std::max(f->a.eval(dims), f->b.eval(dims)); break;
            case SymAtom::Kind::ScaleFloor: v *= scaled_floor(f->a.eval(dims), f->scale, f->f32); break;
            }
        }
        sum += v;
    }
    return sum;
}

std::string SymDim::grouped(const SymDim &d) {
    return d.terms_.size() == 1 ? d.text() : "(" + d.text() + ")";
}

std::string SymDim::term_text(const Term &t, bool first) {
    int64_t c = t.coeff;
    std::string sign = c < 0 ? (first ? "-" : " - ") : (first ? "" : " + ");
    if (c < 0) c = -c;
    if (t.factors.empty()) return sign + std::to_string(c);
    bool alone = t.factors.size() == 1 && c == 1;
    std::string s = c == 1 ? "" : std::to_string(c);
    for (const auto &f : t.factors) {
        // a plain floor division in a product keeps its parentheses: (H/4)*W is not H*W/4
        bool wrap = !alone && f->kind == SymAtom::Kind::FloorDiv && f->text.compare(0, 5, "ceil(") != 0;
        s += (s.empty() ? "" : "*") + (wrap ? "(" + f->text + ")" : f->text);
    }
    return sign + s;
}

std::string SymDim::text() const {
    if (terms_.empty()) return "0";
    std::string s;
    for (const Term &t : terms_) {
        if (!t.factors.empty()) s += term_text(t, s.empty());
    }
    if (!terms_[0].factors.empty()) return s;
    return s + term_text(terms_[0], s.empty());
}

std::string SymDim::c_code(const std::string &dims) const {
    if (terms_.empty()) return "0LL";
    std::string s;
    for (const Term &t : terms_) {
        std::string term = std::to_string(t.coeff) + "LL";
        for (const auto &f : t.factors) {
            switch (f->kind) {
            case SymAtom::Kind::Dim: term += " * " + dims + "[" + std::to_string(f->index) + "]"; break;
            case SymAtom::Kind::FloorDiv: term += " * fusor_fdiv(" + f->a.c_code(dims) + ", " + f->b.c_code(dims) + ")"; break;
            case SymAtom::Kind::Max: term += " * fusor_max(" + f->a.c_code(dims) + ", " + f->b.c_code(dims) + ")"; break;
            case SymAtom::Kind::ScaleFloor: {
                char buf[40];
                std::snprintf(buf, sizeof buf, "%a", f->scale);
                term += std::string(f->f32 ? " * fusor_scale_floor_f32(" : " * fusor_scale_floor(") + f->a.c_code(dims) + ", " + buf + ")";
                break;
            }
            }
        }
        s += (s.empty() ? "(" : " + (") + term + ")";
    }
    return s;
}

std::vector<int> SymDim::dims_read() const {
    std::vector<int> out;
    for (const Term &t : terms_) {
        for (const auto &f : t.factors) {
            std::vector<int> sub;
            if (f->kind == SymAtom::Kind::Dim) sub = {f->index};
            else {
                sub = f->a.dims_read();
                std::vector<int> b = f->kind == SymAtom::Kind::ScaleFloor ? std::vector<int>() : f->b.dims_read();
                sub.insert(sub.end(), b.begin(), b.end());
            }
            out.insert(out.end(), sub.begin(), sub.end());
        }
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace fusor
