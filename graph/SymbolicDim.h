#pragma once
/** \file
 * SymDim: a tensor dim as an integer expression over a model's named dims ("H", "W"), the way
 * ONNX Runtime's symbolic shape inference and TVM Relax write shapes. Kept in one canonical form:
 * a sum of integer multiples of products of atoms, an atom being a named dim, a floor division,
 * a max, or a floor of a product with a non-integer scale. The rewrites that keep the form
 * canonical make equal expressions compare equal in the cases shape rules produce (a conv chain's
 * floor((floor((H + 1)/2) + 1)/2) is ceil(H/4)); two expressions that compare unequal may still
 * agree at every size.
 *
 * Division rounds down (floor, also for negative numerators). Expressions are immutable values,
 * cheap to copy (atoms are shared). */

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace fusor {

struct SymAtom;

class SymDim {
public:
    SymDim(int64_t c = 0);  // NOLINT: a constant converts implicitly, as in Halide's Expr
    /** The dim \p index of the model's dims (what eval's \p dims indexes), printed as \p name. */
    static SymDim dim(int index, const std::string &name);

    bool is_constant() const;
    /** The value of a constant expression (is_constant), else 0. */
    int64_t constant() const;

    friend SymDim operator+(const SymDim &a, const SymDim &b);
    friend SymDim operator-(const SymDim &a, const SymDim &b);
    friend SymDim operator*(const SymDim &a, const SymDim &b);
    /** floor(a / b); \p b must be positive at every size. */
    static SymDim floor_div(const SymDim &a, const SymDim &b);
    static SymDim max(const SymDim &a, const SymDim &b);
    static SymDim min(const SymDim &a, const SymDim &b);
    /** floor(a * scale) in double arithmetic, as ONNX's Resize computes its output size; with
     * \p f32, the product rounded to float32 first, as a float32 shape computation holds it
     * (Floor(Cast(H) * 0.7)). */
    static SymDim scale_floor(const SymDim &a, double scale, bool f32 = false);

    bool operator==(const SymDim &o) const { return text() == o.text(); }
    bool operator!=(const SymDim &o) const { return !(*this == o); }

    /** The value with the model's dims at \p dims (by index). */
    int64_t eval(const std::vector<int64_t> &dims) const;
    /** Readable text: "H", "2*W + 1", "ceil(H/4)", "H*W/16" ('/' rounds down). Canonical: equal
     * expressions print equally. */
    std::string text() const;
    /** A C expression of type long long over the array \p dims, calling fusor_fdiv(a, b),
     * fusor_max(a, b) and fusor_scale_floor(a, s) (runtime/aot/fusor_aot_support.h). */
    std::string c_code(const std::string &dims) const;
    /** Indices of the model's dims it reads. */
    std::vector<int> dims_read() const;
    /** The canonical form's terms, the constant one (no factors) first: what a writer walks. */
    struct TermView {
        int64_t coeff = 0;
        std::vector<std::shared_ptr<const SymAtom>> factors;
    };
    std::vector<TermView> terms() const;

private:
    struct Term {
        std::vector<std::shared_ptr<const SymAtom>> factors;  ///< sorted by text; none: the constant term
        int64_t coeff = 0;
        std::string key;  ///< the factors' texts joined by '*'
    };
    std::vector<Term> terms_;  ///< sorted by key, the constant term (key "") first; no zero coefficient

    static SymDim atom(std::shared_ptr<const SymAtom> a);
    void add_term(Term t);
    static SymDim floor_div_const(const SymDim &a, int64_t c);
    static std::string term_text(const Term &t, bool first);
    /** text(), in parentheses when it has more than one term. */
    static std::string grouped(const SymDim &d);
    friend struct SymAtom;
};

/** A SymDim atom: a named dim, floor(a / b), max(a, b) or floor(a * scale). */
struct SymAtom {
    enum class Kind { Dim, FloorDiv, Max, ScaleFloor } kind = Kind::Dim;
    int index = 0;        ///< Dim
    std::string name;     ///< Dim
    SymDim a, b;          ///< FloorDiv, Max; ScaleFloor: a
    double scale = 1;     ///< ScaleFloor
    bool f32 = false;     ///< ScaleFloor: the product rounded to float32 before the floor
    std::string text;     ///< canonical text (SymDim::text of the atom)
};

/** Floor division of integers (rounds toward negative infinity). */
int64_t floor_div(int64_t a, int64_t b);

}  // namespace fusor
